/// Movement judged from positions alone, for fixes without a speed (docs/semantics.md,
/// "Visits": still at once, brisk, three minutes, steady progress).
extension VisitDetector {
    /// Keeps the recent path (whatever stay it belongs to) and, for a fix without a speed,
    /// judges movement on it: the movement rules mark path fixes moving or creeping, and the
    /// stays' early fixes of that stretch, so the first fixes of a stay are judged with the
    /// approach before them. Each path fix `symmetricWindow` / 2 old (or followed by a gap of
    /// `sparseGap`) is then judged: if neither and within the core of the current or
    /// tentative next stay, it is that stay's latest still fix (`lastStill`). A fix that has,
    /// with the latest path fix, made less than half the progress the rules look for since the
    /// path fix `progressWindow` / 2 back (or stayed within twice its accuracy of it) is still
    /// at once.
    mutating func track(_ fix: Fix, _ unit: SIMD3<Double>) {
        if fix.speed == nil { addToHalfMinute(fix.time, unit) }
        if fix.time - previousFix >= parameters.briskWindow
            && Geodesy.chordDistance(previousUnit, unit) <= parameters.briskDistance {
            standingSilence = (previousFix, fix.time, unit)
        }
        // Two walked steps in a row (one can be the walk in or out of a stay): the fix between
        // them moved, before the path judges it. A sparse logger (a step of `sparseGap` or
        // more) pacing near its cadence makes every other step short: one step marks the fix
        // it starts from.
        if stepWalked && (previousStepWalked || fix.time - previousFix >= parameters.sparseGap),
           let i = path.lastIndex(where: { $0.time == previousFix }) {
            markMoved(i, before: fix.time)
        }
        // A position repeated unchanged, then left by a jump of `briskDistance` or more, was
        // held, not measured (a phone re-reporting its last fix until it has a new one): the
        // path takes it at the position that came next, the first news of where the device was.
        let repeated = fix.speed == nil && unit == previousUnit
        defer { previousRepeated = repeated }
        if previousRepeated && !repeated && fix.speed == nil, let plane = current,
           plane.distance(previousUnit, unit) >= parameters.briskDistance {
            var i = path.count - 1
            while i >= 0 && path[i].unit == previousUnit { path[i].unit = unit; i -= 1 }
        }
        if fix.speed == nil, let plane = current,
           let back = path.lastIndex(where: { fix.time - $0.time >= parameters.progressWindow / 2 }),
           fix.time - path[back].time <= parameters.progressWindow {
            let p = plane.local(unit), accuracy = 2 * (fix.horizontalAccuracy ?? 0)
            func net(_ i: Int, _ q: (x: Double, y: Double)) -> Double {
                Stay.planarDistance(plane.local(path[i].unit), q)
            }
            // This fix and the latest path fix must both be near the fix a minute back: a
            // receiver whose fixes jump tens of metres a second lands near an earlier one by
            // chance now and then, walking away too.
            let latest = path.last.map { plane.local($0.unit) } ?? p, minute = max(net(back, p), net(back, latest))
            // A standing silence a minute back is where the device was then, not the path fix
            // before it: it stood at the silence's end position until the silence ended.
            let minuteBack = fix.time.adding(seconds: -parameters.progressWindow / 2)
            let leftStanding = standingSilence.from <= minuteBack && standingSilence.until >= minuteBack
                && Stay.planarDistance(plane.local(standingSilence.unit), p)
                    >= max(parameters.progressSpeed * parameters.progressWindow / 4, accuracy)
            // Nor brisk over the last half-minute: a lap of a small loop is back where it was
            // a minute ago.
            let recent = path.lastIndex(where: { fix.time - $0.time >= parameters.briskWindow / 2 }) ?? back
            if !leftStanding, minute < max(parameters.progressSpeed * (fix.time - path[back].time) / 2, accuracy),
               net(recent, p) < max(parameters.movingSpeed * (fix.time - path[recent].time) / 2,
                                    parameters.briskDistance / 2, accuracy) {
                markStill(fix.time, unit)
            }
        }
        if let last = path.last, fix.time - last.time < parameters.dwell / Double(Self.earlyCapacity) { return }
        if path.isFull { path.removeFirst() }
        guard fix.speed == nil, let plane = current else {
            path.append((fix.time, unit, false, false))
            return
        }
        if let middle = walkedThrough(to: unit, at: fix.time, accuracy: fix.horizontalAccuracy, in: path, stay: plane) {
            markMoved(middle, before: fix.time)
        }
        if let newest = path.lastIndex(where: { fix.time - $0.time >= parameters.briskWindow / 2 }) {
            // Every path fix that has come of age since the last fix is judged, not only the
            // newest: a fix followed by a short step and then a long one is never the newest.
            var middle = newest
            while middle > 0 && path[middle - 1].time > briskJudgedUntil { middle -= 1 }
            briskJudgedUntil = max(briskJudgedUntil, path[newest].time)
            for m in middle...newest
            where walkedBriskly(through: m, to: unit, at: fix.time, accuracy: fix.horizontalAccuracy, stay: plane) {
                markMoved(m, before: fix.time, crept: true)
            }
        }
        if let newest = path.lastIndex(where: { fix.time - $0.time >= parameters.symmetricWindow / 2 }), newest > 0 {
            // A standing silence that ends at this fix brought several path fixes of age at once
            // (a paused logger's walk in to a stop): each is judged, not only the newest, and
            // the device stood where this fix is from the silence's start on.
            let stood = standingSilence.until == fix.time
            var middle = newest
            while stood && middle > 1 && path[middle - 1].time > progressJudgedUntil { middle -= 1 }
            progressJudgedUntil = max(progressJudgedUntil, path[newest].time)
            let reached = stood ? standingSilence.from : fix.time
            for m in middle...newest
            where progressed(through: m, to: unit, at: fix.time, reached: reached, accuracy: fix.horizontalAccuracy, stay: plane) {
                markMoved(m, before: fix.time, crept: true)
            }
        }
        let sparse = fix.time - (path.last?.time ?? fix.time) >= parameters.sparseGap
        // Every path fix that has come of age since the last call is judged (a sparse logger's
        // step can bring several at once), not only the newest of them.
        let judged = judgedUntil
        for i in path.indices.reversed() {
            let e = path[i]
            guard e.time > judged else { break }
            guard sparse || fix.time - e.time >= parameters.symmetricWindow / 2 else { continue }
            judgedUntil = max(judgedUntil, e.time)
            // Next to fixes lost on the move the rules saw one side only: no verdict is not still.
            let oneSided = e.time >= lostFrom.adding(seconds: -parameters.symmetricWindow / 2)
                && e.time <= lostUntil.adding(seconds: parameters.symmetricWindow / 2)
            if !e.moved && !e.crept && !oneSided { markStill(e.time, e.unit) }
        }
        path.append((fix.time, unit, false, false))
    }

    /// Marks the path fix `i` moving or creeping, and the stays' early fixes from it to the
    /// next path fix. Creeping (the brisk and three-minute rules) is not still, but does not
    /// count as moving for the arrival's back-dating and the share of moving fixes.
    mutating func markMoved(_ i: Int, before time: Timestamp, crept: Bool = false) {
        func mark(_ e: inout EarlyFix) { if crept { e.crept = true } else { e.moved = true } }
        mark(&path[i])
        lastMoved = max(lastMoved, path[i].time)
        let from = path[i].time, to = i + 1 < path.count ? path[i + 1].time : time
        for k in early.indices where early[k].time >= from && early[k].time < to { mark(&early[k]) }
        for k in pendingEarly.indices where pendingEarly[k].time >= from && pendingEarly[k].time < to {
            mark(&pendingEarly[k])
        }
    }

    /// Movement over half a minute, for fixes without a speed: the path fix `middle`, at
    /// least `briskWindow` / 2 back, is creeping when the path fixes either side of it (at least
    /// that far each way, and no more than two progress windows apart: a longer gap is a logger
    /// asleep) are at least `movingSpeed` × the time between them apart, and at least
    /// `briskDistance` and twice the fix's accuracy — a still receiver's jitter over half a
    /// minute is less.
    func walkedBriskly(through middle: Int, to unit: SIMD3<Double>, at time: Timestamp, accuracy: Double?, stay: Stay) -> Bool {
        let half = parameters.briskWindow / 2
        guard let back = path[..<middle].lastIndex(where: { path[middle].time - $0.time >= half }),
              time - path[back].time <= 2 * parameters.progressWindow else { return false }
        let net = steadyDisplacement(from: back, to: unit, stay: stay)
        return net >= max(parameters.movingSpeed * (time - path[back].time), parameters.briskDistance,
                          2 * (accuracy ?? 0))
    }

    /// Progress over three minutes, for fixes without a speed (the labelling guide's rule 2):
    /// the path fix `symmetricWindow` / 2 back is creeping when the path fixes that far either
    /// side of it are at least `progressSpeed` × the time between them apart (and twice the
    /// accuracy), unless that time is over twice the window (a logger asleep). Near the start
    /// of the path, the first path fix serves as the one before, if `briskWindow` / 2 back.
    /// `reached`: when the device got to `unit` (a standing silence's start), so the time
    /// counted is to `symmetricWindow` / 2 after the fix at most from then.
    func progressed(through middle: Int, to unit: SIMD3<Double>, at time: Timestamp, reached: Timestamp,
                    accuracy: Double?, stay: Stay) -> Bool {
        let half = parameters.symmetricWindow / 2
        guard middle > 0,
              let back = path[..<middle].lastIndex(where: { path[middle].time - $0.time >= half })
                ?? (path[middle].time - path[0].time >= parameters.briskWindow / 2 ? 0 : nil),
              time - path[back].time <= 2 * parameters.symmetricWindow else { return false }
        let net = steadyDisplacement(from: back, to: unit, stay: stay)
        let span = max(reached, path[middle].time.adding(seconds: half)) - path[back].time
        guard net >= max(parameters.progressSpeed * min(time - path[back].time, span), 2 * (accuracy ?? 0)) else { return false }
        // A ride or brisk walk on one side of the fix and none on the other is the way in or
        // out of a stop, not a slow walk through it.
        let a = stay.local(path[back].unit), m = stay.local(path[middle].unit), p = stay.local(unit)
        let length = Stay.planarDistance
        let before = length(a, m), after = length(m, p)
        let beforeTime = path[middle].time - path[back].time, afterTime = time - path[middle].time
        if after < net / 4 && before >= Self.ridingSpeed * beforeTime { return false }
        if before < net / 4 && after >= Self.ridingSpeed * afterTime { return false }
        return true
    }

    /// The displacement from the path fix `back` to `unit` that the fixes next to each end
    /// agree on: the least of the distances from `back` or the path fix before it to `unit` or
    /// the latest path fix. A walk moves them all; a spike at either end moves one.
    func steadyDisplacement(from back: Int, to unit: SIMD3<Double>, stay: Stay) -> Double {
        let a = stay.local(path[back].unit), b = back > 0 ? stay.local(path[back - 1].unit) : a
        let p = stay.local(unit), q = path.last.map { stay.local($0.unit) } ?? p
        let d = Stay.planarDistance
        return min(d(a, p), d(a, q), d(b, p), d(b, q))
    }

    /// A still fix within the core of the current or the tentative next stay is its latest still one.
    mutating func markStill(_ time: Timestamp, _ unit: SIMD3<Double>) {
        if var s = current, time >= s.start, s.distanceFromCentre(unit) <= parameters.coreRadius {
            s.lastStill = max(s.lastStill, time); current = s
        }
        if var p = pending, time >= p.start, p.distanceFromCentre(unit) <= parameters.coreRadius {
            p.lastStill = max(p.lastStill, time); pending = p
        }
    }

    /// Movement seen in positions, for fixes without a Doppler speed: the remembered fix
    /// halfway back over `progressWindow` seconds, when the device made steady progress
    /// through it — the fix a window back (the newest at least that old, and no more than
    /// twice: a longer gap is a logger asleep, no evidence) is at least `progressSpeed` × the
    /// time away (`steadyDisplacement`: a stale or jumped fix at either end is no walk), the
    /// path through the middle fix is not far from straight (≤ 2 × the net displacement) and
    /// each half made at least a quarter of the progress. Jitter wanders round a point: its net
    /// displacement does not grow with the window and its path doubles back. A slow walk up a
    /// hill or along a beach makes steady progress; a device that stopped halfway made none in
    /// the second half. The net displacement must also be at least twice the fix's 95 %
    /// accuracy when the receiver reports one, so that white noise of a poor receiver, whose
    /// points can fall anywhere in its error disc, is no walk.
    func walkedThrough(to unit: SIMD3<Double>, at time: Timestamp, accuracy: Double?,
                       in buffer: RingBuffer<EarlyFix>, stay: Stay) -> Int? {
        let window = parameters.progressWindow
        guard let back = buffer.lastIndex(where: { time - $0.time >= window }),
              time - buffer[back].time <= 2 * window,
              let middle = buffer.lastIndex(where: { time - $0.time >= window / 2 }), middle > back else { return nil }
        let p = stay.local(unit), a = stay.local(buffer[back].unit), m = stay.local(buffer[middle].unit)
        let length = Stay.planarDistance
        let net = steadyDisplacement(from: back, to: unit, stay: stay), first = length(a, m), second = length(m, p)
        guard net >= max(parameters.progressSpeed * (time - buffer[back].time), 2 * (accuracy ?? 0)),
              first + second <= 2 * net, min(first, second) >= net / 4 else { return nil }
        return middle
    }
}
