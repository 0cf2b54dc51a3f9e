internal import Dispatch

/// A queued write as the writer sees it, whatever its result type.
protocol GroupedWrite: Sendable {
    /// Runs the work inside the open transaction; its failure, if any, after which its savepoint must be rolled back.
    func run(_ connection: any SQLConnection) -> LedgerError?
    /// Wakes the caller: with the work's own result, or with `failure` when the group did not commit.
    func finish(_ failure: LedgerError?)
}

/// One caller's work and, once the group is done, its result.
///
/// `outcome` is written on a writer queue before `done` is signalled and read by the caller after waiting on
/// `done`; the semaphore orders the two, which the `@unchecked Sendable` relies on.
final class PendingWrite<Result: Sendable>: GroupedWrite, @unchecked Sendable {
    private let body: @Sendable (any SQLConnection) throws(LedgerError) -> Result
    private var outcome: Swift.Result<Result, LedgerError>?
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable (any SQLConnection) throws(LedgerError) -> Result) {
        self.body = body
    }

    func run(_ connection: any SQLConnection) -> LedgerError? {
        do throws(LedgerError) {
            outcome = .success(try body(connection))
            return nil
        } catch {
            outcome = .failure(error)
            return error
        }
    }

    func finish(_ failure: LedgerError?) {
        if let failure {
            // A piece that failed on its own keeps its own reason; the others learn the group did not commit.
            switch outcome {
            case .failure?: break
            case .success?, nil: outcome = .failure(failure)
            }
        }
        done.signal()
    }

    func wait(timeout: Double, database: String) throws(LedgerError) -> Result {
        // A disk that stalls (a network volume, a dying device) or a database server that hangs must not hold the
        // caller longer than store_timeout. The write may still commit after the caller was told it failed;
        // notifications and receipts are idempotent, so the retry that follows changes nothing.
        guard done.wait(timeout: LedgerDeadline.bounding(.now() + timeout)) == .success else {
            throw LedgerError(.unavailable, "the \(database) write did not commit within \(timeout) s", reason: .timeout)
        }
        guard let outcome else { throw LedgerError(.queryFailed, "a grouped write finished without a result") }
        return try outcome.get()
    }
}
