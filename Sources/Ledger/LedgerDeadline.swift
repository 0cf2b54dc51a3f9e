internal import Dispatch

/// One deadline for every ledger call a request makes, however many: a claim writes and then reads, and two waits of
/// `store_timeout` in a row would keep its client twice as long as configured.
///
/// Bound by the caller around its ledger work (``within(seconds:_:)``); each wait inside the ledger (a pooled
/// connection, a statement's answer, the SQLite writer's commit) ends at the earlier of its own timeout and this.
public enum LedgerDeadline {
    @TaskLocal static var current: DispatchTime?

    /// Runs `body` with every ledger wait in it ending `seconds` from now at the latest.
    public static func within<Result, Failure: Error>(
        seconds: Double, _ body: () throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let deadline = DispatchTime.now() + seconds
        let bounded = current.map { min($0, deadline) } ?? deadline
        let outcome: Swift.Result<Result, Failure> = $current.withValue(bounded) {
            do throws(Failure) { return .success(try body()) } catch { return .failure(error) }
        }
        return try outcome.get()
    }

    /// The earlier of `deadline` and the caller's.
    static func bounding(_ deadline: DispatchTime) -> DispatchTime {
        current.map { min($0, deadline) } ?? deadline
    }
}
