import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTP1Server
import ReceiptEngine
import ReceiptService
import Ledger
import CryptoFloor
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `receiptd serve` from its arguments, for tests that run a server in-process: a usage error is printed to `errors`
/// and returns 2, `--help` goes to `output`.
///
/// - Parameters:
///   - metrics: what `/metrics` shows; given so that the log's queue, made before, counts its dropped lines there.
///   - started: called once serving, with what SIGTERM does, which then stops it instead of signals; for tests that
///     run several servers in one process, where a signal cannot tell them apart.
func runServe(
    arguments: [String], environment: [String: String], output: @escaping LogSink, errors: LogSink,
    metrics: ServiceMetrics = ServiceMetrics(), started: ((_ shutDown: @escaping @Sendable () -> Void) -> Void)? = nil
) -> Int32 {
    let command: Serve
    switch parseCommand(Serve.self, arguments) {
    case .success(let parsed): command = parsed
    case .failure(let end):
        end.status == ExitStatus.success ? output(end.message) : errors(end.message)
        return end.status
    }
    return serve(
        command.options, environment: environment, output: output, errors: errors, metrics: metrics, started: started)
}

/// `receiptd serve` as the process runs it. The log goes to stdout through a bounded queue: a stdout nobody reads
/// costs lines (dropped and counted in `receiptd_log_lines_dropped_total`), never answers. Failures before the server
/// starts go to stderr at once.
func serveWithQueuedLog(_ options: ServeOptions) -> Int32 {
    let metrics = ServiceMetrics()
    let output: LogLineQueue
    do {
        output = try LogLineQueue(
            write: { StandardStream.output.write($0) }, lineDropped: { metrics.recordLogLinesDropped() })
    } catch {
        printError("receiptd: cannot start the log's writer thread: \(error)")
        return ExitStatus.failure
    }
    // The last lines ("stopped", a failed start's ledger lines) must reach the terminal, unless stdout has stalled.
    defer { output.flush(timeout: .seconds(2)) }
    return serve(
        options, environment: ProcessInfo.processInfo.environment, output: output.sink,
        errors: ServiceLog.standardError, metrics: metrics)
}

/// Loads the configuration, runs the start-up checks, listens, serves until SIGTERM or SIGINT, then drains.
///
/// - Returns: the process exit status: 0 after a clean shutdown, 1 when the configuration is bad, a start-up check
///   fails or the port cannot be bound. Every failure is one line on stderr.
func serve(
    _ options: ServeOptions, environment: [String: String], output: @escaping LogSink, errors: LogSink,
    metrics: ServiceMetrics = ServiceMetrics(), started: ((_ shutDown: @escaping @Sendable () -> Void) -> Void)? = nil
) -> Int32 {
    let configuration: ServiceConfiguration
    do {
        configuration = try ServiceConfiguration.resolve(
            options: options, environment: environment, fileExists: { FileManager.default.fileExists(atPath: $0) })
    } catch {
        errors("receiptd: \(error)")
        return ExitStatus.failure
    }
    let problems = StartupCheck.problems(in: configuration)
    guard problems.isEmpty else {
        for problem in problems { errors("receiptd: \(problem)") }
        return ExitStatus.failure
    }

    let log = ServiceLog(format: configuration.logFormat, sink: output)
    let readiness = ServiceReadiness(isReady: false)
    // The lock before the ledger: its background task opens (and may migrate) the file as soon as it exists.
    let fileLock: SQLiteFileLock?
    do throws(LedgerError) {
        fileLock = try lockStoreFile(configuration)
    } catch {
        errors("receiptd: store \(configuration.storeDescription): \(error.message)")
        return ExitStatus.failure
    }
    let ledger = configuration.makeLedger()
    ledger.observeHealth(log.ledgerHealth)
    do throws(LedgerError) {
        // A SQLite file that cannot be opened, or is damaged, will not heal by waiting: refuse to start. PostgreSQL
        // down at start is served (503 where the ledger is needed) while the background task keeps trying it, and
        // the health observer has logged why.
        if let failure = try ledger.openNow(), fileLock != nil { throw failure }
    } catch {
        errors("receiptd: store \(configuration.storeDescription): \(error.message)")
        return ExitStatus.failure
    }
    // Every return from here closes the ledger (a clean stop leaves the SQLite file whole), then lets the lock go.
    func closeStore() {
        do {
            try ledger.close()
        } catch {
            log.event("store not closed cleanly", [("store", configuration.storeDescription), ("cause", error.message)])
        }
    }
    defer {
        closeStore()
        withExtendedLifetime(fileLock) {}
    }
    let routes = ReceiptRoutes(
        configuration: configuration, validator: configuration.makeValidator(),
        jwsVerifier: configuration.makeJWSVerifier(), ledger: ledger, metrics: metrics, readiness: readiness, log: log)
    var httpConfiguration = configuration.httpServerConfiguration
    httpConfiguration.mayHandleInline = routes.mayAnswerInline
    httpConfiguration.waitingLanes = [routes.appleLane(on: .main), routes.ledgerLane(on: .main)]
    let server = HTTPServer(
        configuration: httpConfiguration, handler: { routes.handle($0, on: .main) },
        failureResponse: routes.failureResponse, accessLog: log.access)
    // A second server, not a second socket of one: the HTTP layer stays one listener per server, and which routes
    // a socket serves is the routes' decision (`Listener.public`).
    let publicServer = configuration.publicListener.map { listener in
        var publicConfiguration = configuration.publicServerConfiguration(listener)
        publicConfiguration.mayHandleInline = routes.mayAnswerInline
        publicConfiguration.waitingLanes = [routes.appleLane(on: .public), routes.ledgerLane(on: .public)]
        return HTTPServer(
            configuration: publicConfiguration, handler: { routes.handle($0, on: .public) },
            failureResponse: routes.failureResponse, accessLog: log.access)
    }
    let servers = [server] + (publicServer.map { [$0] } ?? [])
    // Weak: the server holds the routes, which hold the metrics; a strong capture would make a cycle that outlives
    // a failed start (tests call this function many times in one process).
    metrics.observeOpenConnections { [weak server, weak publicServer] in
        (server?.openConnections ?? 0) + (publicServer?.openConnections ?? 0)
    }

    let port: Int
    do {
        port = try server.start()
    } catch {
        errors("receiptd: cannot listen on \(configuration.host):\(configuration.port): \(error)")
        return ExitStatus.failure
    }
    var publicPort: Int?
    if let publicServer, let listener = configuration.publicListener {
        do {
            publicPort = try publicServer.start()
        } catch {
            errors("receiptd: cannot listen on public \(listener.host):\(listener.port): \(error)")
            server.shutdown()
            server.waitUntilStopped()
            return ExitStatus.failure
        }
    }
    // A caller that stops the servers itself leaves the process's signals alone: a signal cannot say which `serve` of
    // a process it is for, and once one `serve` had cancelled its signal sources, a later one in the same process was
    // seen never to receive SIGTERM (Dispatch on Linux), which would break the one test that sends it.
    let syncToStop = SyncToStop()
    let signals =
        started == nil
        ? ShutdownSignals(servers: servers, readiness: readiness, log: log, syncToStop: syncToStop) : nil
    readiness.markReady()
    var listening = [
        ("address", "http://\(hostForURL(configuration.host)):\(port)"),
        ("apps", String(configuration.apps.count)),
        ("environments", configuration.environments.map(\.rawValue).joined(separator: ",")),
        ("config", configuration.sourcePath ?? "defaults"),
        ("store", configuration.storeDescription),
        ("api_tokens", String(configuration.apiTokens.count)),
    ]
    if let publicPort, let listener = configuration.publicListener {
        listening.append(("public_address", "http://\(hostForURL(listener.host)):\(publicPort)"))
    }
    log.event("listening", listening)
    for note in configuration.startupNotes { log.event("note", [("message", note)]) }
    if let warning = configuration.authorizationWarning { log.event("warning", [("message", warning)]) }
    let sync = ServerAPISync.start(routes.intake, log: log)
    syncToStop.set(sync)
    let dispatcher: WebhookDispatcher?
    do {
        dispatcher = try WebhookDispatcher.start(
            configuration: configuration, ledger: ledger, nudge: routes.intake.webhookNudge, metrics: metrics.webhooks,
            log: log)
    } catch {
        errors("receiptd: cannot start the webhooks' threads: \(error)")
        ShutdownSignals.shutDown(
            servers: servers, readiness: readiness, log: log, syncToStop: syncToStop, reason: "failed start")
        for server in servers { server.waitUntilStopped() }
        sync?.stop(within: configuration.shutdownGracePeriod)
        signals?.cancel()
        return ExitStatus.failure
    }
    syncToStop.set(dispatcher)
    // Apple's duties, each on a thread of its own: the answers to Apple's refund questions, and the calls claims queued.
    var consumptionSender: ConsumptionSender?
    let appleCalls: AppleCallWorker?
    do {
        consumptionSender = try ConsumptionSender.start(routes.intake, registry: metrics.registry, log: log)
        syncToStop.set(consumptionSender)
        appleCalls = try AppleCallWorker.start(
            configuration: configuration, ledger: ledger, clients: routes.serverAPIClients, nudge: routes.appleCallNudge,
            metrics: metrics.appleCalls, log: log)
    } catch {
        errors("receiptd: cannot start the threads of Apple's duties: \(error)")
        ShutdownSignals.shutDown(
            servers: servers, readiness: readiness, log: log, syncToStop: syncToStop, reason: "failed start")
        for server in servers { server.waitUntilStopped() }
        sync?.stop(within: configuration.shutdownGracePeriod)
        dispatcher?.stop(within: configuration.shutdownGracePeriod)
        consumptionSender?.stop(within: configuration.shutdownGracePeriod)
        signals?.cancel()
        return ExitStatus.failure
    }
    syncToStop.set(appleCalls)
    started?({
        ShutdownSignals.shutDown(
            servers: servers, readiness: readiness, log: log, syncToStop: syncToStop, reason: "requested")
    })

    for server in servers { server.waitUntilStopped() }
    // Counted from when the shutdown began, as the servers' drain is: Apple gets no longer than the requests did.
    sync?.stop(within: configuration.shutdownGracePeriod)
    // Tries under way end or are left to their leases; none is recorded after the store closes.
    dispatcher?.stop(within: configuration.shutdownGracePeriod)
    // A refund answer under way is sent or left to its lease, as a webhook delivery is.
    consumptionSender?.stop(within: configuration.shutdownGracePeriod)
    appleCalls?.stop(within: configuration.shutdownGracePeriod)
    signals?.cancel()
    // The servers have stopped, so no request is still writing (one past the grace period fails `unavailable`).
    closeStore()
    log.event("stopped")
    return ExitStatus.success
}

/// Opens the ledger before the server listens. A SQLite file is this server's alone (the returned lock, held until
/// exit) and must open and pass `quick_check`: nothing would repair it later, so any failure stops start-up. A
/// PostgreSQL that cannot be reached is not fatal (receiptd serves, 503 where the ledger is needed, and reconnects):
/// its cause is returned, passwords masked, for the log. A schema newer than this binary stops start-up on both.
/// One server per SQLite file: the lock on `PATH.lock`, held for the server's life; nil for PostgreSQL or no store.
private func lockStoreFile(_ configuration: ServiceConfiguration) throws(LedgerError) -> SQLiteFileLock? {
    guard case .sqlite(let path)? = configuration.store else { return nil }
    // The folder is part of the default config (git-ignored): make it rather than fail the first run.
    let folder = path.deletingLastPathComponent
    if !folder.isEmpty { try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
    return try SQLiteFileLock(databasePath: path)
}

private func hostForURL(_ host: String) -> String {
    host.contains(":") ? "[\(host)]" : host
}

/// SIGTERM and SIGINT start a graceful shutdown: `/readyz` turns 503, the server stops accepting and lets in-flight
/// requests finish within the grace period, and `waitUntilStopped` returns.
///
/// The sources are made here, in a function, not in `main.swift`: a Dispatch handler written in top-level code is
/// inferred `@MainActor` and traps when Dispatch runs it on another queue.
private final class ShutdownSignals {
    private let sources: [any DispatchSourceSignal]

    init(servers: [HTTPServer], readiness: ServiceReadiness, log: ServiceLog, syncToStop: SyncToStop) {
        let queue = DispatchQueue(label: "receiptd.signals")
        var sources: [any DispatchSourceSignal] = []
        for signalNumber in [SIGTERM, SIGINT] {
            // The default action would kill the process before the source sees the signal.
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            let name = signalNumber == SIGTERM ? "SIGTERM" : "SIGINT"
            source.setEventHandler { @Sendable in
                Self.shutDown(servers: servers, readiness: readiness, log: log, syncToStop: syncToStop, reason: name)
            }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    static func shutDown(
        servers: [HTTPServer], readiness: ServiceReadiness, log: ServiceLog, syncToStop: SyncToStop, reason: String
    ) {
        guard readiness.isReady else { return }
        readiness.markShuttingDown()
        log.event("shutting down", [("signal", reason)])
        syncToStop.beginStopping()
        for server in servers { DispatchQueue.global().async { @Sendable in server.shutdown() } }
    }

    func cancel() {
        for source in sources { source.cancel() }
        signal(SIGTERM, SIG_DFL)
        signal(SIGINT, SIG_DFL)
    }
}

/// `serve`'s background sync, webhook dispatcher and consumption sender once started: the signals are watched from
/// before they start, and a shutdown tells them to wind down as the shutdown begins, so that their grace runs beside
/// the servers' drain.
private final class SyncToStop: Sendable {
    private let sync = Mutex<ServerAPISync?>(nil)
    private let dispatcher = Mutex<WebhookDispatcher?>(nil)
    private let consumptionSender = Mutex<ConsumptionSender?>(nil)
    private let appleCalls = Mutex<AppleCallWorker?>(nil)

    func set(_ sync: ServerAPISync?) { self.sync.withLock { $0 = sync } }

    func set(_ dispatcher: WebhookDispatcher?) { self.dispatcher.withLock { $0 = dispatcher } }

    func set(_ sender: ConsumptionSender?) { consumptionSender.withLock { $0 = sender } }

    func set(_ appleCalls: AppleCallWorker?) { self.appleCalls.withLock { $0 = appleCalls } }

    func beginStopping() {
        sync.withLock { $0 }?.beginStopping()
        dispatcher.withLock { $0 }?.beginStopping()
        consumptionSender.withLock { $0 }?.beginStopping()
        appleCalls.withLock { $0 }?.beginStopping()
    }
}
