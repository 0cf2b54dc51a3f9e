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

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `receiptd serve`: loads the configuration, listens, serves until SIGTERM or SIGINT, then drains.
///
/// - Parameter arguments: the arguments after `serve`.
/// - Returns: the process exit status: 0 after a clean shutdown (or `--help`), 1 when the configuration is bad or the
///   port cannot be bound, 2 for bad flags. Every failure is one line on stderr.
func runServe(arguments: [String]) -> Int32 {
    runServe(
        arguments: arguments, environment: ProcessInfo.processInfo.environment,
        output: ServiceLog.standardOutput, errors: ServiceLog.standardError)
}

func runServe(
    arguments: [String], environment: [String: String], output: @escaping LogSink, errors: LogSink
) -> Int32 {
    let options: ServeOptions
    do {
        options = try ServeOptions(arguments: arguments)
    } catch {
        errors("receiptd serve: \(error)")
        errors(ServeOptions.usage)
        return ExitStatus.usage
    }
    if options.showHelp {
        output(ServeOptions.usage)
        return ExitStatus.success
    }
    let configuration: ServiceConfiguration
    do {
        configuration = try ServiceConfiguration.resolve(
            options: options, environment: environment, fileExists: { FileManager.default.fileExists(atPath: $0) })
    } catch {
        errors("receiptd: \(error)")
        return ExitStatus.failure
    }

    let log = ServiceLog(format: configuration.logFormat, sink: output)
    let metrics = ServiceMetrics()
    let readiness = ServiceReadiness(isReady: false)
    let ledger = configuration.makeLedger()
    do {
        try ledger.openNow()
    } catch {
        errors("receiptd: store \(configuration.storeDescription): \(error.message)")
        return ExitStatus.failure
    }
    let routes = ReceiptRoutes(
        configuration: configuration, validator: configuration.makeValidator(),
        jwsVerifier: configuration.makeJWSVerifier(), ledger: ledger, metrics: metrics, readiness: readiness, log: log)
    var httpConfiguration = configuration.httpServerConfiguration
    httpConfiguration.mayHandleInline = routes.mayAnswerInline
    let server = HTTPServer(
        configuration: httpConfiguration, handler: routes.handle, failureResponse: routes.failureResponse,
        accessLog: log.access)
    // Weak: the server holds the routes, which hold the metrics; a strong capture would make a cycle that outlives
    // a failed start (tests call this function many times in one process).
    metrics.observeOpenConnections { [weak server] in server?.openConnections ?? 0 }

    let port: Int
    do {
        port = try server.start()
    } catch {
        errors("receiptd: cannot listen on \(configuration.host):\(configuration.port): \(error)")
        return ExitStatus.failure
    }
    let signals = ShutdownSignals(server: server, readiness: readiness, log: log)
    readiness.markReady()
    log.event(
        "listening",
        [
            ("address", "http://\(hostForURL(configuration.host)):\(port)"),
            ("apps", String(configuration.apps.count)),
            ("environments", configuration.environments.map(\.rawValue).joined(separator: ",")),
            ("config", configuration.sourcePath ?? "defaults"),
            ("store", configuration.storeDescription),
        ])
    for note in configuration.startupNotes { log.event("note", [("message", note)]) }
    let sync = ServerAPISyncSchedule(routes: routes, log: log)
    sync?.start()

    server.waitUntilStopped()
    sync?.stop()
    signals.cancel()
    log.event("stopped")
    return ExitStatus.success
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

    init(server: HTTPServer, readiness: ServiceReadiness, log: ServiceLog) {
        let queue = DispatchQueue(label: "receiptd.signals")
        var sources: [any DispatchSourceSignal] = []
        for signalNumber in [SIGTERM, SIGINT] {
            // The default action would kill the process before the source sees the signal.
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            let name = signalNumber == SIGTERM ? "SIGTERM" : "SIGINT"
            source.setEventHandler { @Sendable in
                guard readiness.isReady else { return }
                readiness.markShuttingDown()
                log.event("shutting down", [("signal", name)])
                DispatchQueue.global().async { @Sendable in server.shutdown() }
            }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    func cancel() {
        for source in sources { source.cancel() }
        signal(SIGTERM, SIG_DFL)
        signal(SIGINT, SIG_DFL)
    }
}
