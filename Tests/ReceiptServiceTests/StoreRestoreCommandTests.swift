import Foundation
import Ledger
import TestSupport
import Testing

@testable import receiptd

/// `receiptd store restore`, `store status`'s health, and `serve`'s refusals, through the commands' own entry points:
/// exit statuses are the contract (0 done, 1 refused or failed, 2 usage).
struct StoreRestoreCommandTests {
    /// A config whose store is `ledger.sqlite` beside it, in a folder of its own.
    private struct World {
        let folder: String
        let config: String
        var ledgerPath: String { folder + "/ledger.sqlite" }

        init(store: String = #"{"sqlite": "ledger.sqlite"}"#) throws {
            folder = (Scratch.newPath("world") as NSString).deletingLastPathComponent
            config = folder + "/receiptd.json"
            try Data(#"{"store": \#(store)}"#.utf8).write(to: URL(fileURLWithPath: config))
        }

        /// A closed ledger at `path` with `count` verified transactions.
        func makeLedger(at path: String, transactions count: Int) throws {
            let ledger = try SQLiteLedger(path: path)
            let facts = (0..<count).map { index in
                TransactionFacts(
                    transactionID: "t\(index)", originalTransactionID: "t\(index)", productID: "coins",
                    bundleID: "com.example.app", type: "Consumable", purchaseDate: 0, originalPurchaseDate: 0,
                    expiresDate: nil, revocationDate: nil, revocationReason: nil, inAppOwnershipType: "PURCHASED",
                    webOrderLineItemID: nil, environment: "Sandbox", signedDate: 0, payloadJSON: "{}")
            }
            try ledger.record(transactions: facts, source: .receipt)
            try ledger.close()
        }

        func transactions() throws -> Int64 { try SQLiteLedger(path: ledgerPath).counts().transactions }
    }

    private func restore(_ world: World, _ backup: String) -> Int32 {
        runReceiptd(["store", "restore", backup, "--config", world.config])
    }

    @Test func restore_ofABackup_replacesTheLedger_exitZero() throws {
        let world = try World()
        try world.makeLedger(at: world.ledgerPath, transactions: 2)
        let backup = world.folder + "/backup.sqlite"
        try world.makeLedger(at: backup, transactions: 7)
        #expect(restore(world, backup) == ExitStatus.success)
        #expect(try world.transactions() == 7)
    }

    @Test func restore_whileAServerHoldsTheLedger_exitOne_andChangesNothing() throws {
        let world = try World()
        try world.makeLedger(at: world.ledgerPath, transactions: 2)
        let backup = world.folder + "/backup.sqlite"
        try world.makeLedger(at: backup, transactions: 7)
        let server = try SQLiteFileLock(databasePath: world.ledgerPath)
        #expect(restore(world, backup) == ExitStatus.failure)
        withExtendedLifetime(server) {}
        #expect(try world.transactions() == 2)
    }

    @Test func restore_ofSomethingThatIsNotALedger_exitOne() throws {
        let world = try World()
        try world.makeLedger(at: world.ledgerPath, transactions: 2)
        let backup = world.folder + "/notes.txt"
        try Data("not a database".utf8).write(to: URL(fileURLWithPath: backup))
        #expect(restore(world, backup) == ExitStatus.failure)
        #expect(restore(world, world.folder + "/missing.sqlite") == ExitStatus.failure)
        #expect(try world.transactions() == 2)
    }

    @Test func restore_ofAPostgreSQLStore_isAUsageError() throws {
        let world = try World(store: #"{"postgres": "host=/nonexistent dbname=x"}"#)
        #expect(restore(world, world.folder + "/backup.sqlite") == ExitStatus.usage)
    }

    @Test(arguments: [
        (["restore"], ExitStatus.usage), (["restore", "a.sqlite", "b.sqlite"], ExitStatus.usage),
        (["restore", "a.sqlite", "--json"], ExitStatus.usage), (["restore", "--help"], ExitStatus.success),
    ])
    func restoreUsage(arguments: [String], status: Int32) {
        #expect(runReceiptd(["store"] + arguments) == status)
    }

    @Test func restoreHelp_listsOnlyTheAcceptedFlags() {
        let flags = helpText(of: StoreRestore.self).split(whereSeparator: { !($0.isLetter || $0 == "-") })
            .filter { $0.hasPrefix("--") }
        #expect(Set(flags) == ["--config", "--help", "--version"])
    }

    // MARK: - status

    @Test func status_ofAMissingFileThatCanBeCreated_exitZero_andCreatesNothing() throws {
        let world = try World(store: #"{"sqlite": "not-yet/ledger.sqlite"}"#)
        #expect(runReceiptd(["store", "status", "--config", world.config]) == ExitStatus.success)
        #expect(!FileManager.default.fileExists(atPath: world.folder + "/not-yet"))
    }

    @Test func status_ofAFileThatCannotBeCreated_exitOne() throws {
        let world = try World(store: #"{"sqlite": "occupied/ledger.sqlite"}"#)
        try Data("a file, not a folder".utf8).write(to: URL(fileURLWithPath: world.folder + "/occupied"))
        #expect(runReceiptd(["store", "status", "--config", world.config]) == ExitStatus.failure)
    }

    @Test func status_ofADamagedLedger_exitOne() throws {
        let world = try World()
        try world.makeLedger(at: world.ledgerPath, transactions: 400)
        try damage(world.ledgerPath)
        #expect(runReceiptd(["store", "status", "--config", world.config]) == ExitStatus.failure)
        #expect(runReceiptd(["store", "status", "--config", world.config, "--json"]) == ExitStatus.failure)
    }

    // MARK: - serve

    @Test func serve_onADamagedLedger_exitOne_namingTheFile() throws {
        let world = try World()
        try world.makeLedger(at: world.ledgerPath, transactions: 400)
        try damage(world.ledgerPath)
        let errors = CapturedLines()
        let status = runServe(
            arguments: ["--config", world.config, "--port", "0"], environment: [:], output: CapturedLines().sink,
            errors: errors.sink)
        #expect(status == ExitStatus.failure)
        #expect(errors.all.count == 1)
        #expect(errors.all.first?.contains(world.ledgerPath) == true)
    }

    @Test func serve_onALedgerAnotherServerHolds_exitOne_namingTheFile() throws {
        let world = try World()
        let server = try SQLiteFileLock(databasePath: world.ledgerPath)
        let errors = CapturedLines()
        let status = runServe(
            arguments: ["--config", world.config, "--port", "0"], environment: [:], output: CapturedLines().sink,
            errors: errors.sink)
        withExtendedLifetime(server) {}
        #expect(status == ExitStatus.failure)
        #expect(errors.all.first?.contains(world.ledgerPath + ".lock") == true)
        #expect(!FileManager.default.fileExists(atPath: world.ledgerPath))
    }

    /// Garbage over the cell pointers of every page but the first (the schema), so that the file opens and SQLite's
    /// checks find the damage.
    private func damage(_ path: String) throws {
        var data = try Data(contentsOf: URL(fileURLWithPath: path))
        for page in stride(from: 4096, to: data.count, by: 4096) {
            data.replaceSubrange(page + 12..<page + 40, with: [UInt8](repeating: 0xFF, count: 28))
        }
        try data.write(to: URL(fileURLWithPath: path))
    }
}
