import Foundation
import TestSupport
import Testing

@testable import Ledger

/// A SQLite ledger file that is whole: complete on its own after a clean stop, served by one process, backed up and
/// restored without ever being half one thing and half another.
struct SQLiteWholeFileTests {
    typealias E = AppleEvents

    private static func notification(_ number: Int) -> NotificationFacts {
        E.notification(
            "SUBSCRIBED", signed: E.t0 + Int64(number), uuid: "n\(number)",
            transaction: E.transaction("t\(number)", purchase: E.t0, expires: nil, signed: E.t0 + Int64(number)))
    }

    /// A ledger at `path` holding `count` notifications, closed.
    private static func closedLedger(at path: String, notifications count: Int) throws {
        let ledger = try SQLiteLedger(path: path, clock: TestClock.fixed)
        for number in 0..<count { _ = try ledger.record(notification(number)) }
        try ledger.close()
    }

    private static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    private static func bytes(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    private static func copy(_ source: String, to destination: String) throws {
        try bytes(source).write(to: URL(fileURLWithPath: destination))
    }

    // MARK: - a clean stop

    @Test func close_afterConcurrentWrites_leavesEveryCommitInTheFileAlone_andNoLog() throws {
        let path = Scratch.newPath("live.sqlite")
        let ledger = try SQLiteLedger(path: path, clock: TestClock.fixed)
        onThreads(4) { thread in
            for index in 0..<50 { _ = try? ledger.record(Self.notification(thread * 1000 + index)) }
        }
        _ = try ledger.transactions(originalTransactionIDs: [E.original])  // a reader connection is open too
        #expect(Self.exists(path + "-wal"))

        try ledger.close()

        #expect(!Self.exists(path + "-wal"))
        #expect(!Self.exists(path + "-shm"))
        // The obvious backup: the .sqlite file alone, copied.
        let copy = Scratch.newPath("copied.sqlite")
        try Self.copy(path, to: copy)
        let copied = try SQLiteLedger(path: copy, clock: TestClock.fixed)
        #expect(try copied.counts().notifications == 200)
        #expect(try copied.notification(uuid: "n3049") != nil)
    }

    @Test func afterClose_readsAndWritesAreUnavailable_andCloseAgainIsHarmless() throws {
        let ledger = try SQLiteLedger(path: Scratch.newPath("closed.sqlite"), clock: TestClock.fixed)
        _ = try ledger.record(Self.notification(1))
        try ledger.close()
        #expect(ledgerError { _ = try ledger.record(Self.notification(2)) }?.code == .unavailable)
        #expect(ledgerError { _ = try ledger.notification(uuid: "n1") }?.code == .unavailable)
        try ledger.close()
    }

    // MARK: - one server per file

    @Test func secondLockOnOneFile_isInUse_evenInTheSameProcess_untilTheFirstGoes() throws {
        let path = Scratch.newPath("served.sqlite")
        var first: SQLiteFileLock? = try SQLiteFileLock(databasePath: path)
        #expect(ledgerError { _ = try SQLiteFileLock(databasePath: path) }?.code == .inUse)
        #expect(first?.lockPath == path + ".lock")
        first = nil
        let second = try SQLiteFileLock(databasePath: path)
        #expect(second.databasePath == path)
        // The lock names a sidecar file; the database itself is neither created nor touched.
        #expect(!Self.exists(path))
        #expect(Self.exists(path + ".lock"))
    }

    @Test func secondLockThroughASymbolicLink_isInUse_namingTheProcess() throws {
        let path = Scratch.newPath("served.sqlite")
        try SQLiteLedger(path: path, clock: TestClock.fixed).close()
        let first = try SQLiteFileLock(databasePath: path)
        let fileLink = Scratch.newPath("link-to-file.sqlite")
        try FileManager.default.createSymbolicLink(atPath: fileLink, withDestinationPath: path)
        let folderLink = Scratch.newPath("link-to-folder")
        try FileManager.default.createSymbolicLink(
            atPath: folderLink, withDestinationPath: (path as NSString).deletingLastPathComponent)
        for other in [fileLink, folderLink + "/served.sqlite"] {
            let error = ledgerError { _ = try SQLiteFileLock(databasePath: other) }
            #expect(error?.code == .inUse, "\(other)")
            #expect(error?.message.contains("process \(getpid())") == true, "\(other)")
            #expect(error?.message.contains(other) == true)
        }
        withExtendedLifetime(first) {}
    }

    @Test func secondLockThroughAHardLink_isInUse_namingTheProcess() throws {
        let path = Scratch.newPath("served.sqlite")
        try SQLiteLedger(path: path, clock: TestClock.fixed).close()
        var first: SQLiteFileLock? = try SQLiteFileLock(databasePath: path)
        let hardLink = Scratch.newPath("hard-link.sqlite")
        #expect(link(path, hardLink) == 0)
        let error = ledgerError { _ = try SQLiteFileLock(databasePath: hardLink) }
        #expect(error?.code == .inUse)
        #expect(error?.message.contains("hard link") == true)
        #expect(error?.message.contains("process \(getpid())") == true)
        // Once the first goes, the file is free under any name.
        #expect(first != nil)
        first = nil
        #expect(throws: Never.self) { _ = try SQLiteFileLock(databasePath: hardLink) }
    }

    @Test func inspectionOfAFileThatIsNotADatabase_saysDamaged_notEmpty() throws {
        let path = Scratch.newPath("garbage.sqlite")
        try Data(repeating: 0x5A, count: 16384).write(to: URL(fileURLWithPath: path))
        let inspection = try #require(try LedgerInspection.read(.sqlite(path: path)))
        #expect(!inspection.problems.isEmpty)
        #expect(!inspection.isReadable)
    }

    // MARK: - start-up

    @Test func damagedFile_isRefusedAtOpen_asCorrupt() throws {
        let path = Scratch.newPath("damaged.sqlite")
        try Self.closedLedger(at: path, notifications: 300)
        var data = try Self.bytes(path)
        // Garbage over every page's cell pointers (page 1, the schema, stays readable so that the file opens).
        let pageSize = 4096
        for page in stride(from: pageSize, to: data.count, by: pageSize) {
            data.replaceSubrange(page + 12..<page + 40, with: [UInt8](repeating: 0xFF, count: 28))
        }
        try data.write(to: URL(fileURLWithPath: path))

        #expect(ledgerError { _ = try SQLiteLedger(path: path, clock: TestClock.fixed) }?.code == .corrupt)
        let inspection = try #require(try LedgerInspection.read(.sqlite(path: path)))
        #expect(!inspection.problems.isEmpty)
    }

    @Test func fileThatIsNotADatabase_isRefusedAtOpen() throws {
        let path = Scratch.newPath("garbage.sqlite")
        try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: path))
        #expect(ledgerError { _ = try SQLiteLedger(path: path, clock: TestClock.fixed) } != nil)
    }

    @Test func inspection_tellsNotYetCreated_fromCannotBeCreated() throws {
        let folder = Scratch.newPath("folder")
        #expect(try LedgerInspection.read(.sqlite(path: folder + "/new/deeper/ledger.sqlite")) == nil)
        #expect(!Self.exists(folder))
        let file = Scratch.newPath("a-file")
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        let error = ledgerError { _ = try LedgerInspection.read(.sqlite(path: file + "/ledger.sqlite")) }
        #expect(error?.code == .unavailable)
        #expect(error?.message.contains("cannot be created") == true)
    }

    @Test func inspection_ofASoundLedger_hasNoProblems_andLeavesNoLog() throws {
        let path = Scratch.newPath("sound.sqlite")
        try Self.closedLedger(at: path, notifications: 3)
        let inspection = try #require(try LedgerInspection.read(.sqlite(path: path)))
        #expect(inspection.problems.isEmpty)
        #expect(inspection.counts?.notifications == 3)
        #expect(!Self.exists(path + "-wal"))
    }

    // MARK: - backup

    @Test func backup_isNamedOnlyOnceWhole_andLeavesNoTemporaryFile() throws {
        let path = Scratch.newPath("live.sqlite")
        let ledger = try SQLiteLedger(path: path, clock: TestClock.fixed)
        _ = try ledger.record(Self.notification(1))
        let folder = Scratch.newPath("backups")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try ledger.backup(to: folder + "/backup.sqlite")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["backup.sqlite"])
        // Taken: a second backup to the same name fails and leaves the first as it was.
        let first = try Self.bytes(folder + "/backup.sqlite")
        #expect(ledgerError { try ledger.backup(to: folder + "/backup.sqlite") } != nil)
        #expect(try Self.bytes(folder + "/backup.sqlite") == first)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["backup.sqlite"])
        // A failed backup (its folder is missing) leaves nothing either.
        #expect(ledgerError { try ledger.backup(to: folder + "/missing/backup.sqlite") } != nil)
        #expect(!Self.exists(folder + "/missing"))
    }

    // MARK: - restore

    @Test func restore_overALeftoverLog_installsTheBackup() throws {
        let backup = Scratch.newPath("backup.sqlite")
        let source = try SQLiteLedger(path: Scratch.newPath("source.sqlite"), clock: TestClock.fixed)
        for number in 0..<5 { _ = try source.record(Self.notification(number)) }
        try source.backup(to: backup)

        // The state a kill -9 leaves: a -wal full of another history beside the file being replaced.
        let target = Scratch.newPath("target.sqlite")
        let crashed = try SQLiteLedger(path: target, clock: TestClock.fixed)
        for number in 100..<140 { _ = try crashed.record(Self.notification(number)) }
        let leftoverLog = try Self.bytes(target + "-wal")
        try crashed.close()
        try leftoverLog.write(to: URL(fileURLWithPath: target + "-wal"))

        let lock = try SQLiteFileLock(databasePath: target)
        let restored = try SQLiteLedger.restore(from: backup, holding: lock)
        #expect(restored.counts?.notifications == 5)
        #expect(!Self.exists(target + "-wal"))
        let reopened = try SQLiteLedger(path: target, clock: TestClock.fixed)
        #expect(try reopened.counts().notifications == 5)
        #expect(try reopened.notification(uuid: "n100") == nil)
        _ = try reopened.record(Self.notification(6))
        // Nothing but the ledger, its lock, and the open ledger's log is left in the folder.
        let folder = (target as NSString).deletingLastPathComponent
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: folder))
        #expect(names.isSubset(of: ["target.sqlite", "target.sqlite.lock", "target.sqlite-wal", "target.sqlite-shm"]))
    }

    @Test func restore_ontoAMissingFile_createsIt() throws {
        let backup = Scratch.newPath("backup.sqlite")
        try Self.closedLedger(at: backup, notifications: 2)
        let target = Scratch.newPath("fresh.sqlite")
        _ = try SQLiteLedger.restore(from: backup, holding: SQLiteFileLock(databasePath: target))
        #expect(try SQLiteLedger(path: target, clock: TestClock.fixed).counts().notifications == 2)
    }

    enum BadBackup: String, CaseIterable, CustomStringConvertible {
        case notADatabase, damaged, notALedger, newerSchema, missing
        var description: String { rawValue }
    }

    @Test(arguments: BadBackup.allCases)
    func restore_ofABadBackup_isRefused_andChangesNothing(_ kind: BadBackup) throws {
        let backup = Scratch.newPath("backup.sqlite")
        let expected: LedgerError.Code
        switch kind {
        case .notADatabase:
            try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: backup))
            expected = .corrupt
        case .damaged:
            try Self.closedLedger(at: backup, notifications: 300)
            var data = try Self.bytes(backup)
            for page in stride(from: 4096, to: data.count, by: 4096) {
                data.replaceSubrange(page + 12..<page + 40, with: [UInt8](repeating: 0xFF, count: 28))
            }
            try data.write(to: URL(fileURLWithPath: backup))
            expected = .corrupt
        case .notALedger:
            let connection = try SQLiteConnection(path: backup)
            try connection.execute("CREATE TABLE other (x)")
            connection.close()
            expected = .notALedger
        case .newerSchema:
            try Self.closedLedger(at: backup, notifications: 1)
            let connection = try SQLiteConnection(path: backup)
            try connection.execute("UPDATE ledger_schema SET version = 999")
            connection.close()
            expected = .schemaTooNew
        case .missing:
            expected = .unavailable
        }
        let target = Scratch.newPath("target.sqlite")
        try Self.closedLedger(at: target, notifications: 4)
        let before = try Self.bytes(target)
        let lock = try SQLiteFileLock(databasePath: target)

        #expect(ledgerError { _ = try SQLiteLedger.restore(from: backup, holding: lock) }?.code == expected)

        #expect(try Self.bytes(target) == before)
        let folder = (target as NSString).deletingLastPathComponent
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: folder)) == ["target.sqlite", "target.sqlite.lock"])
    }
}
