import Foundation
import Synchronization

/// A throwaway PostgreSQL server on a Unix socket in a temporary directory, started by the tests themselves.
///
/// The shared one starts on first use and serves one database per test. Each cluster stops when the test process
/// exits (see `Scratch`, which holds its directory).
public final class PostgresCluster: Sendable {
    public static let shared: Result<PostgresCluster, any Error> = Result { try PostgresCluster() }

    public static let directoryName = "pg"

    public let directory: String
    private let binaries: String
    private let databaseNumbers = Atomic<Int>(0)

    public var dataDirectory: String { "\(directory)/data" }

    public init() throws {
        binaries = try Self.findBinaries()
        directory = Scratch.newPath(Self.directoryName)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let directory = self.directory
        ExitCleanup.register { PostgresCluster.stopPostmaster(directory: directory) }
        if getuid() == 0 {
            // PostgreSQL refuses to run as root.
            try Self.run("/usr/bin/chown", ["postgres", directory])
        }
        try runAsPostgres("initdb", ["-D", dataDirectory, "-A", "trust", "-U", "postgres", "-N"])
        try start()
    }

    public func start() throws {
        try runAsPostgres("pg_ctl", [
            "-D", dataDirectory, "-o", "-k \(directory) -c listen_addresses='' -c fsync=off", "-l",
            "\(directory)/log", "-w", "start",
        ])
    }

    public func stopImmediately() throws {
        try runAsPostgres("pg_ctl", ["-D", dataDirectory, "-m", "immediate", "-w", "stop"])
    }

    public func connectionString(database: String) -> String {
        "host=\(directory) user=postgres dbname=\(database)"
    }

    /// A new empty database; returns its connection string.
    public func newDatabase() throws -> String {
        let name = "ledger_\(databaseNumbers.add(1, ordering: .relaxed).newValue)"
        // PostgreSQL's own client, so that this target needs nothing internal to the Ledger module.
        try Self.run("\(binaries)/createdb", ["-h", directory, "-U", "postgres", name])
        return connectionString(database: name)
    }

    private func runAsPostgres(_ program: String, _ arguments: [String]) throws {
        if getuid() == 0 {
            try Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", "\(binaries)/\(program)"] + arguments)
        } else {
            try Self.run("\(binaries)/\(program)", arguments)
        }
    }

    private static func findBinaries() throws -> String {
        var candidates: [String] = []
        if let output = try? run("/usr/bin/env", ["pg_config", "--bindir"]) {
            candidates.append(output.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let installed = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        candidates += installed.sorted { $0.compare($1, options: .numeric) == .orderedDescending }
            .map { "/usr/lib/postgresql/\($0)/bin" }
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: "\(candidate)/initdb") {
            return candidate
        }
        throw FixtureError(description: """
            PostgreSQL server binaries (initdb, pg_ctl) not found via pg_config or /usr/lib/postgresql/*/bin: \
            install postgresql (apt install postgresql), or set RECEIPTD_SKIP_POSTGRES=1 to run the SQLite tests only
            """)
    }

    /// Stops (SIGSTOP) the postmaster and every process it started: a server that hangs, its sockets open and its
    /// kernel still accepting connections, unlike one that is shut down.
    public func freeze() throws {
        let postmaster = try postmasterID()
        kill(postmaster, SIGSTOP)
        for child in Self.children(of: postmaster) { kill(child, SIGSTOP) }
    }

    /// Resumes (SIGCONT) what `freeze` stopped.
    public func thaw() throws {
        let postmaster = try postmasterID()
        for child in Self.children(of: postmaster) { kill(child, SIGCONT) }
        kill(postmaster, SIGCONT)
    }

    private func postmasterID() throws -> pid_t {
        guard let text = try? String(contentsOfFile: "\(dataDirectory)/postmaster.pid", encoding: .utf8),
            let line = text.split(separator: "\n").first, let pid = pid_t(line)
        else { throw FixtureError(description: "no postmaster.pid in \(dataDirectory): is the cluster running?") }
        return pid
    }

    /// The processes whose parent is `parent`, from /proc/PID/stat ("pid (name) state ppid …"; the name may hold
    /// spaces and parentheses, so fields are counted after the last ')').
    private static func children(of parent: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && pid_t(fields[1]) == parent ? pid : nil
        }
    }

    /// Kills the cluster's postmaster, if running (SIGQUIT: immediate shutdown), and waits up to 2 s for it to go.
    public static func stopPostmaster(directory: String) {
        guard let text = try? String(contentsOfFile: "\(directory)/data/postmaster.pid", encoding: .utf8),
            let line = text.split(separator: "\n").first, let pid = pid_t(line)
        else { return }
        kill(pid, SIGQUIT)
        for _ in 0..<200 where kill(pid, 0) == 0 { usleep(10_000) }
    }

    /// Runs a program to completion with output to a file; posix_spawn and waitpid, because Foundation's `Process`
    /// can miss the exit of a child whose own child (the postmaster) lives on.
    @discardableResult
    public static func run(_ executable: String, _ arguments: [String]) throws -> String {
        var template = Array("/tmp/receiptd-ledger-command.XXXXXX".utf8CString)
        let descriptor = mkstemp(&template)
        guard descriptor >= 0 else { throw FixtureError(description: "mkstemp failed: errno \(errno)") }
        close(descriptor)
        let outputPath = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw FixtureError(description: "cannot run \(executable): errno \(spawned)")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // WIFEXITED and WEXITSTATUS are macros Swift does not import.
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw FixtureError(
                description: "\(executable) \(arguments.joined(separator: " ")) failed (status \(status)): \(output)"
            )
        }
        return output
    }
}
