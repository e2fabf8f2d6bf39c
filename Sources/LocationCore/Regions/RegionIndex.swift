/// A static k-d tree over region centres (as unit vectors in 3-D, so it works across the
/// antimeridian and at the poles), each node knowing the largest radius below it.
///
/// Query: the regions with the smallest *boundary distance* `|distance(p, centre) − radius|`
/// from a point. A node whose box is at great-circle distance ≥ D from the point contains no
/// region with a boundary distance below `D − maxRadius(node)`; best-first search on that
/// bound visits only the nodes that can matter. Rebuilt when regions are added or removed
/// (O(n log² n); registration is rare, fixes are not).
public struct RegionIndex: Sendable {
    struct Node: Sendable {
        var lo: SIMD3<Double>
        var hi: SIMD3<Double>
        var maxRadius: Double
        var start: Int32
        var count: Int32
        var left: Int32   // -1 for a leaf
        var right: Int32
    }

    var nodes: [Node] = []
    var order: [Int32] = []
    var points: [SIMD3<Double>] = []
    var radii: [Double] = []
    static let leafSize = 8

    public init() {}

    /// Builds the tree over `centers`/`radii` (index i = region slot i).
    public init(centers: [Coordinate], radii: [Double]) {
        self.points = centers.map(Geodesy.unitVector)
        self.radii = radii
        self.order = (0..<Int32(centers.count)).map { $0 }
        if !centers.isEmpty {
            nodes.reserveCapacity(2 * centers.count / RegionIndex.leafSize + 2)
            _ = build(0, centers.count)
        }
    }

    public var count: Int { points.count }

    /// Great-circle distance for a chord between unit vectors.
    static func arc(chord: Double) -> Double {
        2 * Geodesy.earthRadius * asin(Swift.min(1, chord / 2))
    }

    /// The boundary distance of region `slot` from the unit vector `p`.
    func key(_ slot: Int, _ p: SIMD3<Double>) -> Double {
        let d = points[slot] - p
        return abs(RegionIndex.arc(chord: (d * d).sum().squareRoot()) - radii[slot])
    }

    private mutating func build(_ start: Int, _ end: Int) -> Int32 {
        var lo = SIMD3<Double>(repeating: .infinity), hi = SIMD3<Double>(repeating: -.infinity)
        var maxR = 0.0
        for i in start..<end {
            let s = Int(order[i])
            lo = pointwiseMin(lo, points[s]); hi = pointwiseMax(hi, points[s])
            maxR = Swift.max(maxR, radii[s])
        }
        let me = Int32(nodes.count)
        nodes.append(Node(lo: lo, hi: hi, maxRadius: maxR, start: Int32(start), count: Int32(end - start), left: -1, right: -1))
        guard end - start > RegionIndex.leafSize else { return me }
        let ext = hi - lo
        let axis = ext.x >= ext.y && ext.x >= ext.z ? 0 : (ext.y >= ext.z ? 1 : 2)
        let pts = points
        order[start..<end].sort { pts[Int($0)][axis] < pts[Int($1)][axis] }
        let mid = (start + end) / 2
        let l = build(start, mid)
        let r = build(mid, end)
        nodes[Int(me)].left = l
        nodes[Int(me)].right = r
        return me
    }

    /// Lower bound of the boundary distance of any region below `node` from `p`.
    func bound(_ node: Node, _ p: SIMD3<Double>) -> Double {
        let q = pointwiseMin(pointwiseMax(p, node.lo), node.hi)
        let d = q - p
        return Swift.max(0, RegionIndex.arc(chord: (d * d).sum().squareRoot()) - node.maxRadius)
    }

    /// The `k` regions with the smallest boundary distance from `point`, and also every region
    /// with a boundary distance ≤ `within`; as (key, slot) sorted by key (ties by slot).
    public func nearest(to point: Coordinate, k: Int, within: Double = 0) -> [(key: Double, slot: Int)] {
        guard !nodes.isEmpty else { return [] }
        let p = Geodesy.unitVector(point)
        var found: [(key: Double, slot: Int)] = []
        var best = MaxHeap()  // the k smallest keys seen
        var queue = MinHeap()
        queue.push(bound(nodes[0], p), 0)
        while let (lb, n) = queue.pop() {
            let threshold = best.count < k ? Double.infinity : Swift.max(best.top, within)
            if lb > threshold { break }
            let node = nodes[Int(n)]
            if node.left < 0 {
                for i in Int(node.start)..<Int(node.start + node.count) {
                    let s = Int(order[i])
                    let key = key(s, p)
                    if best.count < k { best.push(key) } else if key < best.top { best.replaceTop(key) }
                    if key <= within || best.count < k || key <= best.top { found.append((key, s)) }
                }
            } else {
                queue.push(bound(nodes[Int(node.left)], p), node.left)
                queue.push(bound(nodes[Int(node.right)], p), node.right)
            }
        }
        found.sort { $0.key != $1.key ? $0.key < $1.key : $0.slot < $1.slot }
        // Keep the k nearest and everything within `within`.
        var out: [(key: Double, slot: Int)] = []
        out.reserveCapacity(Swift.min(found.count, k + 16))
        for (i, f) in found.enumerated() where i < k || f.key <= within { out.append(f) }
        return out
    }

    struct MaxHeap {
        var a: [Double] = []
        var count: Int { a.count }
        var top: Double { a[0] }
        mutating func push(_ v: Double) {
            a.append(v)
            var i = a.count - 1
            while i > 0 { let p = (i - 1) / 2; if a[p] >= a[i] { break }; a.swapAt(p, i); i = p }
        }
        mutating func replaceTop(_ v: Double) {
            a[0] = v
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                var m = i
                if l < a.count && a[l] > a[m] { m = l }
                if r < a.count && a[r] > a[m] { m = r }
                if m == i { return }
                a.swapAt(i, m); i = m
            }
        }
    }

    struct MinHeap {
        var a: [(Double, Int32)] = []
        mutating func push(_ v: Double, _ n: Int32) {
            a.append((v, n))
            var i = a.count - 1
            while i > 0 { let p = (i - 1) / 2; if a[p].0 <= a[i].0 { break }; a.swapAt(p, i); i = p }
        }
        mutating func pop() -> (Double, Int32)? {
            guard !a.isEmpty else { return nil }
            let top = a[0]
            let last = a.removeLast()
            if !a.isEmpty {
                a[0] = last
                var i = 0
                while true {
                    let l = 2 * i + 1, r = l + 1
                    var m = i
                    if l < a.count && a[l].0 < a[m].0 { m = l }
                    if r < a.count && a[r].0 < a[m].0 { m = r }
                    if m == i { break }
                    a.swapAt(i, m); i = m
                }
            }
            return top
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
