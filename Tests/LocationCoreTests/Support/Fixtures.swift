import LocationCore

/// A point `metres` north of `origin` along the meridian. Distances are stretched by 1e-9 so that
/// floating-point rounding in the haversine never puts an exact multiple just below a threshold.
func north(of origin: Coordinate, metres: Double) -> Coordinate {
    let m = metres * (1 + 1e-9)
    return Coordinate(latitude: origin.latitude + m / (Geodesy.earthRadius * Double.pi / 180),
               longitude: origin.longitude)
}

let origin = Coordinate(latitude: 52.0, longitude: 13.0)
let t0 = CivilTime(year: 2024, month: 5, day: 1, hour: 12).timestamp

func fix(at seconds: Double, _ coordinate: Coordinate, accuracy: Double? = 5) -> Fix {
    Fix(time: t0.adding(seconds: seconds), coordinate: coordinate, mode: .threeD, horizontalAccuracy: accuracy)
}

extension Array where Element == Delivery {
    func locations(for id: SubscriberID) -> [Fix] {
        compactMap { d in
            guard d.subscriber == id, case .location(let f) = d.event else { return nil }
            return f
        }
    }
    var statuses: [SourceState] {
        compactMap { d in
            guard case .status(let s, _) = d.event else { return nil }
            return s
        }
    }
}
