/// Wall-clock bound for "reconnects within 2 s of gpsd being back" in tests with real processes.
///
/// The 2 s requirement is a property of the reconnect policy — a backoff capped at 1 s — which
/// `GPSDSourceLogicTests` and the backoff test prove deterministically. Measured through real
/// gpsd and locationd processes on a loaded 2-core CI machine (fault tests running beside),
/// scheduling adds up to a second or so; this looser bound keeps those tests a check of "it
/// reconnects promptly, not after a long backoff or never" without making them flaky.
let reconnectBound: Duration = .seconds(5)
