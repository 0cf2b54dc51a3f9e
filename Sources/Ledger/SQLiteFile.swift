internal import Glibc

/// One server's claim on a SQLite ledger file: two `receiptd serve` on one file would each trust what they remember
/// (the subscriptions they read, the writes they made) and answer stale state.
///
/// The claim follows the file, not the name it was reached by: an exclusive `flock` on the database file itself (so a
/// hard link finds it), and one on the sidecar `REALPATH.lock`, REALPATH being the path with every symbolic link
/// resolved (so a symbolic link finds it, and so does a server starting before the file exists). Both are taken
/// without waiting and held until this value goes away; the kernel drops them when the process dies, `kill -9`
/// included, so a crash leaves no stale lock. Not POSIX (`fcntl`) locks, which is what SQLite takes on the database:
/// those belong to the process, so a second claim from the same process would succeed, and they only make writers
/// take turns. A `flock` belongs to the open file description, so two claims conflict even within one process.
///
/// Closing any descriptor of the database drops the process's POSIX locks on it, SQLite's included: this value must
/// outlive every SQLite connection to the file (`serve` closes the ledger first). The lock file is never deleted: a
/// holder would otherwise keep a lock on a name nobody else opens. Linux emulates `flock` on NFS; SQLite's WAL needs a
/// local disk anyway.
public final class SQLiteFileLock: Sendable {
    /// The database file this lock guards, as it was named.
    public let databasePath: String
    /// The sidecar lock file: `REALPATH.lock`.
    public let lockPath: String
    private let descriptor: Int32
    /// The database file's own descriptor, or -1 when it did not exist yet.
    private let databaseDescriptor: Int32

    /// The sidecar lock file of a database: `REALPATH.lock`.
    public static func lockPath(forDatabaseAt path: String) -> String { resolvingLinks(path) + ".lock" }

    /// Takes the lock on `databasePath` (creating the lock file, not the database), or fails `in_use` at once when
    /// another holds it, naming the process when it can tell.
    public init(databasePath: String) throws(LedgerError) {
        let realPath = Self.resolvingLinks(databasePath)
        let lockPath = realPath + ".lock"
        var descriptor = retryingInterrupts { open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644) }
        // flock needs no write permission: a lock file made by another user can still be locked.
        if descriptor < 0 && errno == EACCES { descriptor = retryingInterrupts { open(lockPath, O_RDONLY | O_CLOEXEC) } }
        guard descriptor >= 0 else {
            throw LedgerError(
                .unavailable,
                "cannot open the lock file \(lockPath): \(systemMessage()); the folder of \(realPath) must be "
                    + "writable by the user receiptd runs as, on a volume mounted read-write")
        }
        guard retryingInterrupts({ flock(descriptor, LOCK_EX | LOCK_NB) }) == 0 else {
            let reason = errno == EWOULDBLOCK ? nil : systemMessage()
            let holder = Self.holder(descriptor)
            Glibc.close(descriptor)
            if let reason { throw LedgerError(.unavailable, "cannot lock \(lockPath): \(reason)") }
            throw LedgerError(
                .inUse,
                "another receiptd serves \(databasePath)\(holder.map { " (process \($0))" } ?? ""): it holds "
                    + "\(lockPath); one server per SQLite file")
        }
        let databaseDescriptor = retryingInterrupts { open(realPath, O_RDONLY | O_CLOEXEC) }
        if databaseDescriptor >= 0 && retryingInterrupts({ flock(databaseDescriptor, LOCK_EX | LOCK_NB) }) != 0 {
            let reason = errno == EWOULDBLOCK ? nil : systemMessage()
            let holder = Self.flockHolder(of: databaseDescriptor)
            Glibc.close(databaseDescriptor)
            Glibc.close(descriptor)
            if let reason { throw LedgerError(.unavailable, "cannot lock \(realPath): \(reason)") }
            throw LedgerError(
                .inUse,
                "another receiptd serves \(databasePath) under another name (a hard link)"
                    + "\(holder.map { " (process \($0))" } ?? ""): it holds a lock on the file itself; one server per "
                    + "SQLite file")
        }
        self.databasePath = databasePath
        self.lockPath = lockPath
        self.descriptor = descriptor
        self.databaseDescriptor = databaseDescriptor
        let text = Array("\(getpid())\n".utf8)
        if ftruncate(descriptor, 0) == 0 { _ = text.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) } }
    }

    deinit {
        if databaseDescriptor >= 0 { Glibc.close(databaseDescriptor) }
        Glibc.close(descriptor)
    }

    /// `path` with every symbolic link resolved; for a file not created yet, its folder's resolved, plus its name.
    static func resolvingLinks(_ path: String) -> String {
        if let resolved = realPath(path) { return resolved }
        let folder = SQLiteFile.folder(of: path)
        guard let resolvedFolder = realPath(folder) else { return path }
        return (resolvedFolder == "/" ? "" : resolvedFolder) + "/" + SQLiteFile.name(of: path)
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = Glibc.realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func holder(_ descriptor: Int32) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return String(decoding: bytes[..<count], as: UTF8.self).split(separator: "\n").first.flatMap { Int32($0) }
    }

    /// Who holds a `flock` on the file open as `descriptor`, from `/proc/locks` (`1: FLOCK ADVISORY WRITE PID
    /// MAJOR:MINOR:INODE 0 EOF`): a hard link has no lock file of its own to say.
    private static func flockHolder(of descriptor: Int32) -> Int32? {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return nil }
        let device = UInt64(status.st_dev)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
        let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
        let file = String(major, radix: 16, uppercase: false).leftPadded(to: 2) + ":"
            + String(minor, radix: 16, uppercase: false).leftPadded(to: 2) + ":" + String(status.st_ino)
        guard let locks = readSmallFile("/proc/locks") else { return nil }
        for line in locks.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 5, fields[1] == "FLOCK", fields[5] == file else { continue }
            if let pid = Int32(fields[4]) { return pid }
        }
        return nil
    }

    private static func readSmallFile(_ path: String) -> String? {
        let descriptor = retryingInterrupts { open(path, O_RDONLY | O_CLOEXEC) }
        guard descriptor >= 0 else { return nil }
        defer { Glibc.close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while bytes.count < 1 << 22 {
            let count = buffer.withUnsafeMutableBytes { chunk in
                retryingInterrupts { read(descriptor, chunk.baseAddress, chunk.count) }
            }
            guard count > 0 else { break }
            bytes += buffer[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

extension SQLiteConnection {
    /// What SQLite's `quick_check` (or, `thorough`, its slower `integrity_check`, which also checks indexes against
    /// their tables) finds wrong: empty when the file is sound.
    /// A check that cannot finish (SQLite gives up on a page it cannot parse) reports that as the problem.
    func integrityProblems(thorough: Bool = false) -> [String] {
        do throws(LedgerError) {
            let rows = try query(thorough ? "PRAGMA integrity_check" : "PRAGMA quick_check", [])
            // One row may hold many findings, a line each: a damaged file reports hundreds.
            let lines = rows.compactMap { $0.string(0) }.flatMap { $0.split(separator: "\n").map(String.init) }
            return lines == ["ok"] ? [] : lines
        } catch {
            return [error.message]
        }
    }
}

extension SQLiteLedger {
    /// Replaces the database that `lock` guards with a copy of the SQLite ledger at `backupPath`, and returns what
    /// the installed ledger holds.
    ///
    /// The backup is copied next to the database first, and the copy is what gets checked (`integrity_check`, a
    /// schema version from 1 to this build's) and installed, by a rename: the database file is at every moment
    /// either the old one or the whole new one. The old `-wal` and `-shm` are removed before the rename, since a
    /// leftover log would be replayed onto the new file and make it malformed. Holding `lock` proves no server has
    /// the file open. The backup itself is only read. Fails `corrupt`, `not_a_ledger`, `schema_too_new`, or
    /// `unavailable` when a file cannot be read or written; the database is then untouched.
    public static func restore(from backupPath: String, holding lock: SQLiteFileLock) throws(LedgerError)
        -> LedgerInspection
    {
        let target = lock.databasePath
        var backup = stat()
        guard stat(backupPath, &backup) == 0 else {
            throw LedgerError(.unavailable, "cannot read the backup \(backupPath): \(systemMessage())")
        }
        guard backup.st_mode & S_IFMT == S_IFREG else {
            throw LedgerError(.notALedger, "the backup \(backupPath) is not a file")
        }
        var current = stat()
        let replacing = stat(target, &current) == 0
        if replacing && current.st_dev == backup.st_dev && current.st_ino == backup.st_ino {
            throw LedgerError(.unavailable, "the backup \(backupPath) is the ledger file itself")
        }
        var log = stat()
        if stat(backupPath + "-wal", &log) == 0 && log.st_size > 0 {
            throw LedgerError(
                .unavailable,
                "\(backupPath)-wal lies beside the backup: commits there are not in the file; if no server uses "
                    + "\(backupPath), open it once (receiptd store status) to fold them in, or use a backup from "
                    + "receiptd store backup")
        }
        let copy = try SQLiteFile.temporary(besides: target, purpose: "restore")
        var installed = false
        defer {
            if !installed { for path in [copy.path, copy.path + "-wal", copy.path + "-shm"] { unlink(path) } }
        }
        do {
            defer { Glibc.close(copy.descriptor) }
            try SQLiteFile.copyContents(of: backupPath, to: copy.descriptor, named: copy.path)
            // The file that replaces the ledger keeps its permissions and owner (restore may run as root).
            let model = replacing ? current : backup
            fchmod(copy.descriptor, model.st_mode & 0o7777)
            if replacing { _ = fchown(copy.descriptor, current.st_uid, current.st_gid) }
        }
        let inspection = try checkedBackup(at: copy.path, named: backupPath)
        try SQLiteFile.synchronize(copy.path)
        for suffix in ["-wal", "-shm", "-journal"] {
            guard unlink(target + suffix) == 0 || errno == ENOENT else {
                throw LedgerError(.unavailable, "cannot remove \(target)\(suffix): \(systemMessage())")
            }
        }
        guard rename(copy.path, target) == 0 else {
            throw LedgerError(.unavailable, "cannot move the restored copy to \(target): \(systemMessage())")
        }
        installed = true
        try SQLiteFile.synchronizeFolder(of: target)
        return inspection
    }

    /// Checks a ledger file as a restore must: one SQLite connection, closed before returning, so that the file is
    /// left alone, without `-wal` or `-shm`.
    private static func checkedBackup(at path: String, named name: String) throws(LedgerError) -> LedgerInspection {
        let inspection: LedgerInspection
        do throws(LedgerError) {
            let connection = try SQLiteConnection(path: path)
            defer { connection.close() }
            let problems = connection.integrityProblems(thorough: true)
            guard problems.isEmpty else {
                throw LedgerError(
                    .corrupt, "the backup \(name) fails SQLite's integrity_check: \(problems.prefix(3).joined(separator: "; "))")
            }
            inspection = try LedgerInspection.read(connection)
        } catch where error.code == .unavailable {
            // The copy is on the ledger's own disk, just written: what SQLite cannot read in it is the backup's fault.
            throw LedgerError(.corrupt, "the backup \(name) cannot be read as a SQLite database: \(error.message)")
        }
        guard inspection.schemaVersion > 0 else {
            throw LedgerError(.notALedger, "the backup \(name) holds no ledger (no schema version)")
        }
        guard inspection.schemaVersion <= LedgerSchema.latestVersion else {
            throw LedgerError(
                .schemaTooNew,
                "the backup \(name) has ledger schema version \(inspection.schemaVersion), newer than version "
                    + "\(LedgerSchema.latestVersion) of this receiptd")
        }
        return inspection
    }
}

/// Files next to a ledger: temporary copies that become the real file by a rename once whole.
enum SQLiteFile {
    /// A new empty file, hidden in `path`'s folder (a rename never crosses file systems), named after `path`; the
    /// caller owns the descriptor and removes the file unless it renames it.
    static func temporary(besides path: String, purpose: String) throws(LedgerError) -> (path: String, descriptor: Int32) {
        var template = Array("\(folder(of: path))/.\(name(of: path)).\(purpose)-XXXXXX".utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else {
            throw LedgerError(.unavailable, "cannot create a file in \(folder(of: path)): \(systemMessage())")
        }
        return (template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }, descriptor)
    }

    static func copyContents(of source: String, to destination: Int32, named: String) throws(LedgerError) {
        let input = retryingInterrupts { open(source, O_RDONLY | O_CLOEXEC) }
        guard input >= 0 else { throw LedgerError(.unavailable, "cannot read \(source): \(systemMessage())") }
        defer { Glibc.close(input) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { bytes in retryingInterrupts { read(input, bytes.baseAddress, bytes.count) } }
            guard count >= 0 else { throw LedgerError(.unavailable, "cannot read \(source): \(systemMessage())") }
            if count == 0 { return }
            var written = 0
            while written < count {
                let step = buffer.withUnsafeBytes { bytes in
                    retryingInterrupts { write(destination, bytes.baseAddress! + written, count - written) }
                }
                guard step > 0 else { throw LedgerError(.unavailable, "cannot write \(named): \(systemMessage())") }
                written += step
            }
        }
    }

    /// Flushes a file to the disk, so that a rename published afterwards never names a file still in the page cache.
    static func synchronize(_ path: String) throws(LedgerError) {
        let descriptor = retryingInterrupts { open(path, O_RDONLY | O_CLOEXEC) }
        guard descriptor >= 0 else { throw LedgerError(.unavailable, "cannot open \(path): \(systemMessage())") }
        defer { Glibc.close(descriptor) }
        guard retryingInterrupts({ fsync(descriptor) }) == 0 else {
            throw LedgerError(.unavailable, "cannot flush \(path) to disk: \(systemMessage())")
        }
    }

    /// Flushes the folder entry a rename changed.
    static func synchronizeFolder(of path: String) throws(LedgerError) { try synchronize(folder(of: path)) }

    /// Makes `temporary` appear as `path` only if `path` does not exist (a backup never replaces a file): a hard link,
    /// which fails if the name is taken, then the temporary name goes.
    static func publish(_ temporary: String, as path: String) throws(LedgerError) {
        if link(temporary, path) != 0 {
            let failure = errno
            guard failure == EPERM || failure == EOPNOTSUPP, access(path, F_OK) != 0 else {
                throw LedgerError(.unavailable, "cannot name the file \(path): \(String(cString: strerror(failure)))")
            }
            // A file system without hard links: checked just before, like any tool that renames.
            guard rename(temporary, path) == 0 else {
                throw LedgerError(.unavailable, "cannot name the file \(path): \(systemMessage())")
            }
        } else {
            unlink(temporary)
        }
        try synchronizeFolder(of: path)
    }

    /// Why a SQLite file cannot be created at `path` (its folder, or the nearest existing folder above, must be a
    /// writable folder: receiptd creates the missing ones), or nil when it can.
    static func creationProblem(at path: String) -> String? {
        var folder = folder(of: path)
        while access(folder, F_OK) != 0 && errno == ENOENT && folder != "/" && folder != "." {
            folder = self.folder(of: folder)
        }
        var status = stat()
        guard stat(folder, &status) == 0 else { return "\(folder): \(systemMessage())" }
        guard status.st_mode & S_IFMT == S_IFDIR else { return "\(folder) is not a folder" }
        guard access(folder, W_OK | X_OK) == 0 else { return "\(folder): \(systemMessage())" }
        return nil
    }

    static func folder(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        return slash == path.utf8.startIndex ? "/" : String(path[..<slash])
    }

    static func name(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return path }
        return String(path[path.utf8.index(after: slash)...])
    }
}

private func systemMessage() -> String { String(cString: strerror(errno)) }

private func retryingInterrupts<Result: BinaryInteger>(_ call: () -> Result) -> Result {
    while true {
        let result = call()
        if result != -1 || errno != EINTR { return result }
    }
}
