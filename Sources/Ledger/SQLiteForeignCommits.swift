internal import Synchronization

/// Tells commits by other connections to the file (the command line, `sqlite3`, a restore) from this ledger's own.
///
/// SQLite's `PRAGMA data_version` changes, on the connection that reads it, when any *other* connection committed
/// since it last read it. Two connections are read:
/// - `watch`, which never writes: its value moves after every commit, this ledger's writer's included;
/// - the writer's own connection: its value moves only after commits by others.
///
/// Readers compare `watch` with the value last accounted for; a move that nobody accounted for counts as a foreign
/// commit. After each of its commits the writer reads `watch` and then its own connection, in that order, under the
/// lock: a foreign commit that landed before the `watch` read (right after our COMMIT, say) also landed before the
/// writer's own read, so that read moved and the commit is counted; only then is `watch`'s new value accounted for.
/// A foreign commit after the `watch` read moves `watch` again for the next reader. So no foreign commit is ever
/// absorbed as the writer's own; the price of doubt (an own commit a reader saw before the writer accounted for it, a
/// failed read) is one commit counted as foreign too many.
final class SQLiteForeignCommits: Sendable {
    private struct State {
        let watch: SQLiteConnection
        var watched: Int64?
        var writerVersion: Int64?
        var count: UInt64 = 0
    }

    private let state: Mutex<State>

    init(path: String, timeout: Double, writer: SQLiteConnection) throws(LedgerError) {
        let watch = try SQLiteConnection(path: path, timeout: timeout)
        state = Mutex(State(watch: watch, watched: Self.dataVersion(of: watch), writerVersion: Self.dataVersion(of: writer)))
    }

    /// Grows whenever another connection may have committed since it was last read; stays while only the writer
    /// wrote.
    func count() -> UInt64 {
        state.withLock { state in
            let watched = Self.dataVersion(of: state.watch)
            if watched == nil || watched != state.watched { state.count &+= 1 }
            state.watched = watched
            return state.count
        }
    }

    /// Called on the writer's queue right after each of its commits, before the next one begins.
    func noteCommit(of writer: SQLiteConnection) {
        state.withLock { state in
            let watched = Self.dataVersion(of: state.watch)
            let writerVersion = Self.dataVersion(of: writer)
            if writerVersion == nil || writerVersion != state.writerVersion { state.count &+= 1 }
            state.writerVersion = writerVersion
            state.watched = watched
        }
    }

    func close() { state.withLock { $0.watch.close() } }

    private static func dataVersion(of connection: SQLiteConnection) -> Int64? {
        try? connection.query("PRAGMA data_version", []).first?.int64(0)
    }
}
