import Foundation
public import Ledger
import Synchronization

/// The databases every behavioural test runs against.
public enum Backend: String, CaseIterable, Sendable, CustomStringConvertible {
    case sqlite
    case postgres

    /// A parameterized test's argument prints as `sqlite` or `postgres`.
    public var description: String { rawValue }

    /// CI installs PostgreSQL; a developer without it opts out explicitly rather than passing silently.
    public static let tested: [Backend] = skipPostgres ? [.sqlite] : allCases
    public static let skipPostgres = ProcessInfo.processInfo.environment["RECEIPTD_SKIP_POSTGRES"] == "1"
}

/// Clocks that make first-seen and updated-at times predictable.
public enum TestClock {
    public static let fixed: LedgerClock = { 1_700_000_000_000 }

    /// 1, 2, 3, … on successive reads.
    public static func counting() -> LedgerClock {
        let next = Atomic<Int64>(0)
        return { next.add(1, ordering: .relaxed).newValue }
    }
}

public struct FixtureError: Error, CustomStringConvertible {
    public var description: String

    public init(description: String) { self.description = description }
}

/// A fresh, empty ledger of `backend` for one test.
public func makeLedger(_ backend: Backend, clock: @escaping LedgerClock = TestClock.fixed) throws -> any LedgerStore {
    switch backend {
    case .sqlite:
        return try SQLiteLedger(path: Scratch.newPath("ledger.sqlite"), clock: clock)
    case .postgres:
        let cluster = try PostgresCluster.shared.get()
        return try PostgresLedger(connectionString: try cluster.newDatabase(), clock: clock)
    }
}

/// One temporary directory per test process (SQLite files, PostgreSQL clusters), removed at exit.
///
/// A process killed before exiting leaves its directory behind, with running clusters; the next test process stops
/// and removes every directory whose owner process is gone.
public enum Scratch {
    public static let prefix = "receiptd-ledger-tests."

    public static let root: String = {
        removeStale()
        var template = Array("/tmp/\(prefix)XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { fatalError("mkdtemp failed: errno \(errno)") }
        let path = String(cString: made)
        // The postgres user must reach the clusters inside.
        chmod(path, 0o755)
        try? "\(getpid())".write(toFile: "\(path)/owner.pid", atomically: true, encoding: .utf8)
        ExitCleanup.register { Scratch.destroy(path) }
        return path
    }()

    private static let counter = Atomic<Int>(0)

    /// A path named `name` in a new directory of its own.
    public static func newPath(_ name: String) -> String {
        let number = counter.add(1, ordering: .relaxed).newValue
        let directory = "\(root)/\(number)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return "\(directory)/\(name)"
    }

    /// Stops the clusters inside `path`, then removes it.
    public static func destroy(_ path: String) {
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
            PostgresCluster.stopPostmaster(directory: "\(path)/\(entry)/\(PostgresCluster.directoryName)")
        }
        _ = try? PostgresCluster.run("/bin/rm", ["-rf", path])
    }

    private static func removeStale() {
        let now = time(nil)
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        for entry in entries where entry.hasPrefix(prefix) {
            let path = "/tmp/\(entry)"
            let owner = (try? String(contentsOfFile: "\(path)/owner.pid", encoding: .utf8))
                .flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            if let owner {
                if kill(owner, 0) == 0 || errno != ESRCH { continue }
            } else {
                // Another process may have just made it and not yet written its pid.
                var info = stat()
                if stat(path, &info) != 0 || now - info.st_mtim.tv_sec < 600 { continue }
            }
            destroy(path)
        }
    }
}

/// Work to do when the test process exits normally, newest first.
public enum ExitCleanup {
    private static let actions = Mutex<[@Sendable () -> Void]>([])
    private static let installed: Void = {
        atexit { ExitCleanup.runAll() }
    }()

    public static func register(_ action: @escaping @Sendable () -> Void) {
        _ = installed
        actions.withLock { $0.append(action) }
    }

    private static func runAll() {
        let pending = actions.withLock { actions in
            defer { actions = [] }
            return actions
        }
        for action in pending.reversed() { action() }
    }
}

/// Runs `body(index)` on `count` real threads at once and waits for all of them.
public func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let finished = DispatchGroup()
    let start = DispatchSemaphore(value: 0)
    for index in 0..<count {
        finished.enter()
        let thread = Thread {
            start.wait()
            body(index)
            finished.leave()
        }
        thread.start()
    }
    for _ in 0..<count { start.signal() }
    finished.wait()
}

/// The first error a block throws, for `#expect` on codes.
public func ledgerError(_ body: () throws -> Void) -> LedgerError? {
    do {
        try body()
        return nil
    } catch let error as LedgerError {
        return error
    } catch {
        return LedgerError(.queryFailed, "not a LedgerError: \(error)")
    }
}
