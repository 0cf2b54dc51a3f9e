/// The SQLite writer's copy of the rows ``SubscriptionRows`` reads, per original, as its own writes left them: a write
/// with events then reads the state before only of originals it has not seen since. That read, and the pages it
/// fetches from all over the file, were a fifth of the one writer's time (BENCHMARKS.md, issue 25).
///
/// Only rows this writer read or stored itself are kept, and only while nothing else can have changed them:
/// - what a write stored counts once its savepoint is released, and is kept once its group committed; a group that
///   did not commit forgets everything;
/// - a commit by another connection to the file (a second process, `sqlite3` by hand) moves the writer's own
///   `PRAGMA data_version`, read as each group begins, under its write lock: everything is forgotten;
/// - a write that changed an original it did not read (a transaction moved from one original to another) makes
///   everything forgotten at once;
/// - only ``LedgerStatements`` upserts write these tables, and each notes what it stores in its ``OutboxBefore``.
///
/// Touched only on the writer's queue, by the writer and by the write running on it.
final class SubscriptionRowsMemo {
    private var committed: [String: SubscriptionRows.Original] = [:]
    private var committedBytes = 0
    /// What the released writes of the group being written stored.
    private var group: [String: SubscriptionRows.Original] = [:]
    /// What the write running read before itself; what it stored is in their `rowsAfter`.
    private var running: [OutboxBefore] = []
    private var dataVersion: Int64?
    /// What the kept rows may take, estimated high (``SubscriptionRows/Original/bytes``); past it they are dropped
    /// and kept anew from the next writes.
    let byteLimit: Int

    static let defaultByteLimit = 32 << 20

    init(byteLimit: Int = defaultByteLimit) {
        self.byteLimit = byteLimit
    }

    /// The rows of `id` as the group's writes so far left them, or nil when not kept.
    func rows(of id: String) -> SubscriptionRows.Original? { group[id] ?? committed[id] }

    /// The running write read `before`: what it stores goes in once the write is released.
    func noteRunning(_ before: OutboxBefore) { running.append(before) }

    /// A group begins, under the write lock; `dataVersion` is the writer's `PRAGMA data_version` now.
    func beginGroup(dataVersion: Int64?) {
        if dataVersion == nil || dataVersion != self.dataVersion { forget() }
        self.dataVersion = dataVersion
    }

    /// The running write ended: released into its group, or rolled back to its savepoint.
    func endWrite(released: Bool) {
        defer { running = [] }
        guard released else { return }
        for before in running {
            guard let rows = before.rowsAfter else { continue }
            if rows.changedOriginalNotRead {
                forget()
                return
            }
            for id in before.originalTransactionIDs { group[id] = rows.originals[id] ?? SubscriptionRows.Original() }
        }
    }

    /// The group ended, committed or not.
    func endGroup(committed isCommitted: Bool) {
        guard isCommitted else { return forget() }
        for (id, rows) in group {
            committedBytes += rows.bytes - (committed[id]?.bytes ?? 0)
            committed[id] = rows
        }
        group = [:]
        if committedBytes > byteLimit {
            committed = [:]
            committedBytes = 0
        }
    }

    func forget() {
        committed = [:]
        committedBytes = 0
        group = [:]
        running = []
    }
}
