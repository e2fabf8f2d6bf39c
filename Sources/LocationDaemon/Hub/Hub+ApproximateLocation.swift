import LocationCore
import LocationProtocol
import Logging
import NIOCore

/// The approximate-location grid (on the loop; docs/privacy.md).
extension Hub {
    /// The device's approximate-location cell now (on the loop; for tests).
    public var loopPrivacyCell: PrivacyGrid.Cell? { box.value.engine.privacy.cell }

    /// The location approximate programs are shown now (on the loop; for tests).
    public var loopPublishedFix: Fix? { box.value.engine.privacy.publishedFix }

    /// The approximate-location cell remembered from before a restart (before the first fix,
    /// after `privacySecret`).
    public func restorePrivacyCell(_ cell: PrivacyGrid.Cell) {
        box.value.engine.privacy.restore(cell: cell)
        box.value.storedCell = cell
    }

    /// Sets the approximate-location grid's secret (before the first fix).
    public var privacySecret: UInt64 {
        get { 0 }
        set {
            // A new grid; who publishes (reports or ticks, set at init) stays.
            let publishesAtReports = box.value.engine.privacy.publishesAtReports
            box.value.engine.privacy = ApproximateLocation(grid: PrivacyGrid(secret: newValue))
            box.value.engine.privacy.publishesAtReports = publishesAtReports
        }
    }
}
