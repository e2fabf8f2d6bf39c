/// Bounded wander: half-minute means of fixes without a speed that stay round one place
/// (docs/semantics.md, "Bounded wander, without a speed").
extension VisitDetector {
    /// Sums `unit` into the current half-minute (`briskWindow`); a fix that comes a
    /// half-minute or more after its first one closes it, keeps its mean and judges the wander.
    mutating func addToHalfMinute(_ time: Timestamp, _ unit: SIMD3<Double>) {
        let halfCount = thirdCounts.0 + thirdCounts.1 + thirdCounts.2
        if halfCount > 0 && time - halfStart >= parameters.briskWindow {
            let mean = (thirdSums.0 + thirdSums.1 + thirdSums.2) / Double(halfCount), norm = (mean * mean).sum()
            if halves.isFull { halves.removeFirst() }
            var turning: Double?
            if thirdCounts.0 > 0 && thirdCounts.1 > 0 && thirdCounts.2 > 0 {
                let a = thirdSums.0 / Double(thirdCounts.0), b = thirdSums.1 / Double(thirdCounts.1)
                let c = thirdSums.2 / Double(thirdCounts.2)
                let u = b - a, v = c - b, lengths = ((u * u).sum() * (v * v).sum()).squareRoot()
                if lengths > 0 { turning = (u * v).sum() / lengths }
            }
            // The RMS distance of unit vectors from their mean is √(1 − |mean|²).
            halves.append((halfStart, mean / norm.squareRoot(), max(0, 1 - norm).squareRoot() * Geodesy.earthRadius, turning))
            thirdSums = (.zero, .zero, .zero)
            thirdCounts = (0, 0, 0)
            judgeWander(at: time)
        }
        if thirdCounts == (0, 0, 0) { halfStart = time }
        switch (time - halfStart) / parameters.briskWindow {
        case ..<(1.0 / 3): thirdSums.0 += unit; thirdCounts.0 += 1
        case ..<(2.0 / 3): thirdSums.1 += unit; thirdCounts.1 += 1
        default: thirdSums.2 += unit; thirdCounts.2 += 1
        }
    }

    /// Bounded wander, for fixes without a speed: when the half-minute means of the last
    /// `wanderWindow` (at least nine in ten of them there, all of the current stay not yet
    /// reported) stay within `coreRadius` of their own mean (but for `maximumMovingShare` of
    /// them), turn back as often as they go on (consecutive steps' mean cosine ≤ 0, and so do
    /// the steps between the thirds of each), step between them at least as far as the fixes
    /// scatter within one (an offset that wanders, not white noise, which the other rules
    /// judge), and the first third's mean is within `coreRadius` of the last third's (no
    /// progress), the stay's arrival is the first of them (`wanderedFrom`). Indoor multipath
    /// wanders tens of metres in a minute or two, which the movement rules take for a slow
    /// walk; a walk or a lap goes on along its path from third to third (a lap of a minute or
    /// two also from half-minute to half-minute, whose means fall round the loop), and a
    /// short stop with the walk to and from it leaves the core within the window.
    mutating func judgeWander(at time: Timestamp) {
        guard !confirmed, let s = current, s.wanderedFrom == nil,
              let back = halves.firstIndex(where: { time - $0.time <= parameters.wanderWindow + parameters.briskWindow / 2 })
        else { return }
        let count = halves.count - back
        guard count >= 3, Double(count) >= 0.9 * parameters.wanderWindow / parameters.briskWindow,
              halves[back].time >= max(s.start, s.stillFrom) else { return }
        var meanX = 0.0, meanY = 0.0
        for i in back..<halves.count { let q = s.local(halves[i].unit); meanX += q.x; meanY += q.y }
        meanX /= Double(count); meanY /= Double(count)
        var outside = 0, legs = 0.0, scatter = 0.0, turning = 0.0, turns = 0, within = 0.0
        var previous: (x: Double, y: Double)?, step: (x: Double, y: Double)?
        for i in back..<halves.count {
            let q = s.local(halves[i].unit)
            if Stay.planarDistance(q, (meanX, meanY)) > parameters.coreRadius { outside += 1 }
            scatter += halves[i].scatter
            within += halves[i].turning ?? 0
            if let p = previous {
                let v = (x: q.x - p.x, y: q.y - p.y), length = (v.x * v.x + v.y * v.y).squareRoot()
                legs += length
                if let u = step {
                    let before = (u.x * u.x + u.y * u.y).squareRoot()
                    if before > 0 && length > 0 { turning += (u.x * v.x + u.y * v.y) / (before * length); turns += 1 }
                }
                step = v
            }
            previous = q
        }
        guard Double(outside) <= parameters.maximumMovingShare * Double(count), turns > 0, turning <= 0, within <= 0,
              legs / Double(count - 1) >= scatter / Double(count) else { return }
        let third = count / 3
        var first = (x: 0.0, y: 0.0), last = (x: 0.0, y: 0.0)
        for k in 0..<third {
            let a = s.local(halves[back + k].unit), z = s.local(halves[halves.count - 1 - k].unit)
            first.x += a.x / Double(third); first.y += a.y / Double(third)
            last.x += z.x / Double(third); last.y += z.y / Double(third)
        }
        guard Stay.planarDistance(first, last) <= parameters.coreRadius else { return }
        current!.wanderedFrom = halves[back].time
    }
}
