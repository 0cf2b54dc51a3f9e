import Dispatch
import Foundation
import HTTP1Server
import JSONText
@testable import Ledger
import Synchronization
import TestSupport
import Testing

@testable import ReceiptService

/// Every ledger request answers within `store_timeout` + 1 s whatever the database does, a full pool is `store_busy`
/// for that request only, and readiness follows real writes without flapping.
struct LedgerBoundsRouteTests {
    typealias E = SignedEvents

    /// Runs `body` on `count` threads of their own at once (a dispatch queue would run only as many as there are
    /// cores), and returns when all are done.
    static func atOnce(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let done = DispatchGroup()
        for index in 0..<count {
            done.enter()
            Thread {
                body(index)
                done.leave()
            }.start()
        }
        done.wait()
    }

    static func seconds(since start: DispatchTime) -> Double {
        Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    }

    @Test(.enabled(if: !Backend.skipPostgres))
    func claimsOnAFrozenPostgres_eachAnswerWithinStoreTimeoutPlusOneSecond() throws {
        // Its own cluster: freezing the shared one would hang the tests running beside this one.
        let cluster = try PostgresCluster()
        defer {
            try? cluster.thaw()
            PostgresCluster.stopPostmaster(directory: cluster.directory)
        }
        let store = try PostgresLedger(connectionString: try cluster.newDatabase(), timeout: 1, clock: TestClock.fixed)
        let ledger = PurchaseLedger(store: store, storeTimeout: 1)
        let routes = LedgerService.routes(ledger)
        #expect(routes.deliver(try E.subscribed()).status == 200)

        try cluster.freeze()
        // More claims than pooled connections: the later ones wait for a connection, then for the frozen server.
        let answers = Mutex<[(status: Int, code: String?, seconds: Double)]>([])
        Self.atOnce(8) { index in
            let start = DispatchTime.now()
            let answer = routes.claim("7000", account: "account-\(index)")
            answers.withLock { $0.append((Int(answer.status.code), answer.errorCode, Self.seconds(since: start))) }
        }
        for answer in answers.withLock({ $0 }) {
            #expect(answer.status == 503)
            #expect(answer.code == "store_unavailable" || answer.code == "store_busy")
            #expect(answer.seconds < 2, "a claim took \(answer.seconds) s with store_timeout 1 s")
        }
    }

    @Test func writesOnAStalledSQLiteDisk_answerWithinStoreTimeoutPlusOneSecond_andReadinessSaysTimeout() throws {
        let sqlite = try SQLiteLedger(path: Scratch.newPath("stalled.sqlite"), timeout: 0.5, clock: TestClock.fixed)
        let ledger = PurchaseLedger(store: sqlite, storeTimeout: 0.5)
        let routes = LedgerService.routes(ledger)
        #expect(routes.deliver(try E.subscribed()).status == 200)

        // The writer stuck as in an fsync that does not return.
        let stall = DispatchSemaphore(value: 0)
        let stalled = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            try? sqlite.records.database.writer.outsideTransaction { _ throws(LedgerError) in
                stalled.signal()
                stall.wait()
            }
        }
        stalled.wait()
        defer { stall.signal() }
        let start = DispatchTime.now()
        let write = routes.deliver(try LedgerFaultRouteTests.renewal(1))
        #expect(write.errorCode == "store_unavailable")
        #expect(Self.seconds(since: start) < 1.5)
        let claimStart = DispatchTime.now()
        #expect(routes.claim("7000", account: "alice").status == 503)
        #expect(Self.seconds(since: claimStart) < 1.5)
        LedgerFaultRouteTests.await { ledger.health.reason == .timeout }
        let ready = routes.handle(get("/readyz"), on: .main)
        #expect(ready.status == 503)
        #expect(ready.json?["reason"] == .string("timeout"))

        stall.signal()
        LedgerFaultRouteTests.await { routes.handle(get("/readyz"), on: .main).status == 200 }
        #expect(routes.handle(get("/readyz"), on: .main).status == 200)
        #expect(routes.claim("7000", account: "alice").status == 200)
    }

    @Test func twoHundredConcurrentClaims_oneWins_theRestConflictOrAreBusy_andReadinessStays() throws {
        let ledger = PurchaseLedger(store: try makeLedger(.sqlite))
        let routes = LedgerService.routes(ledger)
        #expect(routes.deliver(try E.subscribed()).status == 200)

        let answers = Mutex<[HTTPResponse]>([])
        Self.atOnce(200) { index in
            let answer = routes.claim("7000", account: "account-\(index)")
            answers.withLock { $0.append(answer) }
        }
        let all = answers.withLock { $0 }
        #expect(all.count == 200)
        #expect(all.filter { $0.status == 200 }.count == 1)
        for answer in all where answer.status != 200 {
            if answer.status == 503 {
                #expect(answer.errorCode == "store_busy")
                #expect(answer.headers.values(for: .retryAfter) == ["1"])
            } else {
                #expect(answer.errorCode == "already_claimed")
            }
        }
        #expect(ledger.health == .available)
        #expect(routes.handle(get("/readyz"), on: .main).status == 200)
    }

    @Test func connectionStringLibpqCannotParse_isAStartUpError_namingTheBadPart_withoutThePassword() throws {
        var configuration = ServiceConfiguration()
        configuration.store = .postgres(connectionString: "host=db password=hunter2-secret dbname='unterminated")
        let ledger = configuration.makeLedger()
        let error = ledgerError { _ = try ledger.openNow() }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("unterminated quoted string") == true)
        #expect(error?.message.contains("hunter2") == false)
        // A plain word is a database name to libpq, not a malformed string.
        #expect(throws: Never.self) { try PostgresConnection.checkParses("ledger") }
    }
}

/// Volumes that fill up or refuse writes, made for real (a small tmpfs, a read-only bind mount): these need the
/// privilege to mount, which the tests have when run as root; elsewhere they are skipped.
struct LedgerVolumeRouteTests {
    typealias E = SignedEvents

    /// A mounted tmpfs of `megabytes`, unmounted by `unmount`.
    final class Volume {
        let path: String
        private var mounts: [String]

        init(megabytes: Int) throws {
            path = Scratch.newPath("volume")
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            try Self.run(["mount", "-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", path])
            mounts = [path]
        }

        /// `folder` inside the volume, seen read-only under a new path.
        func readOnlyView(of folder: String) throws -> String {
            let view = Scratch.newPath("read-only-view")
            try FileManager.default.createDirectory(atPath: view, withIntermediateDirectories: true)
            try Self.run(["mount", "--bind", folder, view])
            mounts.insert(view, at: 0)
            try Self.run(["mount", "-o", "remount,ro,bind", view])
            return view
        }

        deinit { for mount in mounts { try? Self.run(["umount", "-l", mount]) } }

        static func run(_ arguments: [String]) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw CocoaError(.fileWriteNoPermission) }
        }

        static let canMount: Bool = {
            guard getuid() == 0, let probe = try? Volume(megabytes: 1) else { return false }
            _ = probe
            return true
        }()
    }

    /// Fills the volume's free space with one file, and returns its path.
    static func fill(_ volume: Volume) -> String {
        let filler = volume.path + "/filler"
        _ = FileManager.default.createFile(atPath: filler, contents: nil)
        guard let handle = FileHandle(forWritingAtPath: filler) else { return filler }
        let chunk = Data(count: 64 * 1024)
        while (try? handle.write(contentsOf: chunk)) != nil {}
        try? handle.close()
        return filler
    }

    @Test(.enabled(if: Volume.canMount, "needs root to mount a small tmpfs"))
    func fullVolume_isNotReady_disk_full_withoutFlapping_untilSpaceIsFreed() throws {
        let volume = try Volume(megabytes: 8)
        let sqlite = try SQLiteLedger(path: volume.path + "/ledger.sqlite", timeout: 0.5, clock: TestClock.fixed)
        let ledger = PurchaseLedger(store: sqlite, storeTimeout: 0.5)
        let captured = CapturedLog()
        ledger.observeHealth(captured.log.ledgerHealth)
        let routes = LedgerService.routes(ledger)
        #expect(routes.deliver(try E.subscribed()).status == 200)

        let filler = Self.fill(volume)
        LedgerFaultRouteTests.await { ledger.health.reason == .diskFull }
        #expect(ledger.health.reason == .diskFull)
        // Polled across several heartbeats, and with writes that may fit in the log's old frames: never ready.
        var answers: [String] = []
        for number in 1...12 {
            _ = routes.deliver(try LedgerFaultRouteTests.renewal(number))
            let ready = routes.handle(get("/readyz"), on: .main)
            answers.append("\(ready.status.code) \(ready.json?["reason"].map { "\($0)" } ?? "")")
            usleep(250_000)
        }
        #expect(answers.allSatisfy { $0.hasPrefix("503") && $0.contains("disk_full") }, "\(answers)")
        #expect(captured.count("ledger unavailable") == 1)

        try FileManager.default.removeItem(atPath: filler)
        LedgerFaultRouteTests.await { routes.handle(get("/readyz"), on: .main).status == 200 }
        #expect(routes.handle(get("/readyz"), on: .main).status == 200)
        #expect(captured.count("ledger available") == 1)
    }

    @Test(.enabled(if: Volume.canMount, "needs root to mount a read-only view"))
    func readOnlyVolumeAtStart_isRefused_read_only_namingTheFileAndTheFix() throws {
        let volume = try Volume(megabytes: 4)
        let folder = volume.path + "/ledger"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try SQLiteLedger(path: folder + "/ledger.sqlite", clock: TestClock.fixed).close()
        let view = try volume.readOnlyView(of: folder)

        let error = ledgerError { _ = try SQLiteLedger(path: view + "/ledger.sqlite", clock: TestClock.fixed) }
        #expect(error?.reason == .readOnly)
        #expect(error?.message.contains(view + "/ledger.sqlite") == true)
        #expect(error?.message.contains("read-write") == true)
        let lock = ledgerError { _ = try SQLiteFileLock(databasePath: view + "/ledger.sqlite") }
        #expect(lock?.code == .unavailable)
        #expect(lock?.message.contains("read-write") == true)
    }
}
