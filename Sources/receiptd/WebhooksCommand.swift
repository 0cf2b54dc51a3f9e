import AppStoreServerAPI
import ArgumentParser
import CryptoFloor
import JSONText
import Ledger
import ReceiptEngine
import ReceiptService

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `receiptd webhooks secret new|list|replay|test`: the outbox of events to the backend's webhooks (docs/events.md).
struct Webhooks: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Webhooks: a new signing secret, the outbox's events and deliveries, replay, a test event.",
        discussion: """
            Events are written to the ledger's outbox with the facts that cause them and delivered by receiptd serve \
            to the config's "webhooks" (docs/events.md). list and replay open the ledger directly, as receiptd store \
            status does, and are safe while receiptd serve runs: a replayed delivery is sent by the running server.
            """ + Store.environment,
        subcommands: [WebhooksSecret.self, WebhooksList.self, WebhooksReplay.self, WebhooksTest.self])
}

struct WebhooksSecret: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "secret", abstract: "Makes signing secrets for a webhook's secret_file.",
        subcommands: [WebhooksSecretNew.self])
}

struct WebhooksSecretNew: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "new",
        abstract: "Prints a new signing secret: 32 random bytes from the kernel, base64url.",
        discussion: """
            Write it to the file a webhook's "secret_file" names, and give the same text to the receiver, which \
            checks Receiptd-Signature with it: receiptd webhooks secret new > webhook-secret. Nothing is written \
            anywhere else; no configuration and no environment variable is read.
            Exit status: 0 printed; 2 a usage error.
            """)

    func execute() -> Int32 {
        execute(output: { print($0) }, randomBytes: systemRandomBytes)
    }

    func execute(output: (String) -> Void, randomBytes: (Int) -> [UInt8]) -> Int32 {
        // Base64url without padding: the same text in a file, an environment variable or a YAML string.
        output(Base64.encode(randomBytes(32), alphabet: .url))
        return ExitStatus.success
    }
}

struct WebhooksList: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Prints the outbox's events, newest first, with each webhook's delivery state.",
        discussion: """
            One line per event (id, type, created at, account or original transaction, sequence), then one per \
            webhook: state (pending, delivered, failed), attempts, next try, the last status or error. Secrets are \
            never printed.
            Exit status: 0 printed (also when no event matches); 1 no store configured or the database cannot be \
            reached; 2 a usage error.
            """ + Store.environment)

    @Option(
        help: ArgumentHelp(
            "Only events with a delivery in this state: pending, failed or delivered.", valueName: "state"),
        transform: { text in try parsed(text, expecting: "pending, failed or delivered", DeliveryState.init(rawValue:))
        })
    var status: DeliveryState?

    @Option(
        help: ArgumentHelp("Only this account's events (the backend's user id).", valueName: "account"),
        transform: { text in
            try parsed(
                text,
                expecting: "1 to \(ReceiptRoutes.maximumAccountBytes) bytes of UTF-8 without control characters"
            ) { ReceiptRoutes.isStorableAccount($0) ? $0 : nil }
        })
    var account: String?

    @Option(
        help: ArgumentHelp("At most this many events (1 to 1000000).", valueName: "count"),
        transform: { text in
            try parsed(text, expecting: "a count from 1 to 1000000") {
                Int($0).flatMap { (1...1_000_000).contains($0) ? $0 : nil }
            }
        })
    var limit = 100

    /// Events read and printed at a time: a listing of a whole outbox never holds it in memory.
    static let pageSize = 1_000

    @Flag(help: "One JSON array of events, each with its deliveries.")
    var json = false

    @OptionGroup var config: ConfigOption

    func execute() -> Int32 {
        runLedgerCommand("webhooks list", configPath: config.config) { (store, ledger) throws(StoreCommandFailure) in
            var array = OutboxListing.JSONArray()
            var listed = 0
            var after: OutboxEvent.Position?
            repeat {
                let wanted = min(Self.pageSize, limit - listed)
                let page: [OutboxEvent]
                do throws(LedgerError) {
                    page = try ledger.events(
                        OutboxQuery(state: status, account: account, after: after, limit: wanted))
                } catch {
                    throw StoreCommandFailure(message: store.explain(error))
                }
                if json {
                    StandardStream.output.write(array.append(page))
                } else if !page.isEmpty {
                    print(OutboxListing.lines(page).joined(separator: "\n"))
                }
                listed += page.count
                after = page.last?.position
                if page.count < wanted { break }
            } while listed < limit
            if json {
                StandardStream.output.write(array.end())
            } else if listed == 0 {
                print(OutboxListing.lines([]).joined(separator: "\n"))
            }
        }
    }
}

struct WebhooksReplay: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Sends deliveries again: of the events named, of every failed one, or of events since a date.",
        discussion: """
            Exactly one of EVENT_ID..., --failed or --since DATE. Each matching delivery is set back to pending, due \
            now (its attempts kept); the running receiptd serve sends it, in order per account. Receivers must \
            already accept an event twice (delivery is at least once).
            DATE: 2026-11-01 (midnight UTC), 2026-11-01T12:00:00Z, or Unix seconds (1793491200).
            Prints how many deliveries were set pending.
            Exit status: 0 done (with --failed or --since also when nothing matched); 1 no event of the ids named is \
            in the outbox, no store is configured or the database cannot be reached; 2 a usage error.
            """ + Store.environment)

    @Argument(help: ArgumentHelp("Events to send again (their id, evt_…).", valueName: "event-id"))
    var eventIDs: [String] = []

    @Flag(help: "Every failed delivery (retried for 72 hours without a 2xx).")
    var failed = false

    @Option(
        help: ArgumentHelp("Every delivery of events created at or after DATE.", valueName: "date"),
        transform: { try replayDate($0) })
    var since: Int64?

    @OptionGroup var config: ConfigOption

    func validate() throws {
        let forms = [!eventIDs.isEmpty, failed, since != nil].filter { $0 }.count
        guard forms == 1 else {
            throw ArgumentParser.ValidationError(
                "give exactly one of EVENT_ID..., --failed or --since DATE (\(forms == 0 ? "none" : "\(forms)") given)")
        }
        if let bad = eventIDs.first(where: { !OutboxListing.isPlausibleEventID($0) }) {
            throw ArgumentParser.ValidationError(
                "\(bad.prefix(80)): an event id is 1 to 200 printable ASCII characters, as webhooks list prints it")
        }
    }

    var replay: OutboxReplay {
        if failed { return .failed }
        if let since { return .since(since) }
        return .events(eventIDs)
    }

    func execute() -> Int32 {
        runLedgerCommand("webhooks replay", configPath: config.config) { (store, ledger) throws(StoreCommandFailure) in
            let count: Int
            do throws(LedgerError) {
                count = try ledger.replay(replay, at: Int64(wallClockSeconds() * 1000))
            } catch {
                throw StoreCommandFailure(message: store.explain(error))
            }
            if count == 0, case .events = replay {
                let named = eventIDs.count == 1 ? "this event" : "these events"
                throw StoreCommandFailure(
                    message: "event_not_found: the outbox holds no delivery of \(named); receiptd webhooks list shows "
                        + "the events it holds (delivered ones are pruned after webhook_retention_days)")
            }
            print("\(count) \(count == 1 ? "delivery" : "deliveries") set pending")
        }
    }
}

struct WebhooksTest: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Sends a TEST event to a webhook now and prints the receiver's answer.",
        discussion: """
            The event is signed like every other and sent outside the outbox (nothing is stored, no server needs to \
            run). Prints the receiver's status, how long it took and the start of its answer.
            Exit status: 0 the receiver answered 2xx; 1 it answered anything else, could not be reached, or the \
            config cannot be read; 2 a usage error (NAME is not one of the config's webhooks).

            Environment: RECEIPTD_CONFIG (the config file when --config is not given).
            """)

    @Argument(help: ArgumentHelp("The webhook's name in the config's \"webhooks\".", valueName: "name"))
    var name: String

    @OptionGroup var config: ConfigOption

    func execute() -> Int32 {
        let configuration: ServiceConfiguration
        do throws(StoreCommandFailure) {
            configuration = try resolvedConfiguration(config.config)
        } catch {
            printError("receiptd webhooks test: \(error.message)")
            return error.status
        }
        return execute(
            in: configuration, now: Int64(wallClockSeconds() * 1000), output: { print($0) }, error: printError)
    }

    func execute(
        in configuration: ServiceConfiguration, now: Int64, output: (String) -> Void, error: (String) -> Void
    ) -> Int32 {
        guard let webhook = configuration.webhooks.first(where: { $0.name == name }) else {
            let configured = configuration.webhooks.map(\.name)
            error(
                "receiptd webhooks test: no webhook is named \(OutboxListing.printable(String(name.prefix(80)))); "
                    + (configured.isEmpty
                        ? "the config has no \"webhooks\""
                        : "the config's webhooks: \(configured.joined(separator: ", "))"))
            return ExitStatus.usage
        }
        let answer = webhook.sendTest(at: now)
        output(OutboxListing.answerLine(webhook: webhook.name, answer))
        return answer.status.map { (200...299).contains($0) } == true ? ExitStatus.success : ExitStatus.failure
    }
}

/// `--since`: what `store sync` takes, or Unix seconds.
func replayDate(_ text: String) throws(ArgumentParser.ValidationError) -> Int64 {
    if !text.isEmpty, text.utf8.count <= 12,
        text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
        let seconds = Int64(text)
    {
        return seconds * 1000
    }
    do {
        return try syncDate(text)
    } catch {
        throw ArgumentParser.ValidationError(
            "\(text.prefix(80)): expected a date like 2026-11-01 or 2026-11-01T12:00:00Z, or Unix seconds")
    }
}

/// The configuration as every command reads it; a file that cannot be read is a failure (exit 1), as for `store`.
private func resolvedConfiguration(_ configPath: String?) throws(StoreCommandFailure) -> ServiceConfiguration {
    do {
        return try ServiceConfiguration.resolve(
            configPath: configPath, environment: ProcessInfo.processInfo.environment,
            fileExists: { FileManager.default.fileExists(atPath: $0) })
    } catch {
        throw StoreCommandFailure(message: error.description)
    }
}

/// How `webhooks list` and `webhooks test` print what they found.
enum OutboxListing {
    /// ``json(_:)``'s text (and a newline), written a page of events at a time.
    struct JSONArray {
        private var isEmpty = true

        mutating func append(_ events: [OutboxEvent]) -> [UInt8] {
            var out: [UInt8] = []
            for event in events {
                out += Array((isEmpty ? "[" : ",").utf8)
                isEmpty = false
                // An element one level deep: its own pretty text, each line indented once more. A newline inside a
                // string is escaped, so every newline here is the layout's.
                let element = OutboxListing.json(event).serialized(pretty: true).dropLast()
                out += Array("\n  ".utf8)
                for byte in element {
                    out.append(byte)
                    if byte == 0x0A { out += Array("  ".utf8) }
                }
            }
            return out
        }

        func end() -> [UInt8] { Array((isEmpty ? "[]\n\n" : "\n]\n\n").utf8) }
    }

    static func lines(_ events: [OutboxEvent]) -> [String] {
        if events.isEmpty { return ["no events"] }
        var lines: [String] = []
        for event in events {
            let subject = event.account.map { "account \($0)" } ?? "original \(event.originalTransactionID)"
            lines.append("\(event.id) \(event.type) \(time(event.createdAt)) \(subject) sequence \(event.sequence)")
            for delivery in event.deliveries {
                var line =
                    "  \(delivery.webhook): \(delivery.state.rawValue), \(delivery.attempts) "
                    + (delivery.attempts == 1 ? "attempt" : "attempts")
                if delivery.state == .pending, let next = delivery.nextAttemptAt { line += ", next try \(time(next))" }
                if let delivered = delivery.deliveredAt { line += ", delivered \(time(delivered))" }
                if let last = lastOutcome(delivery) { line += ", last: \(last)" }
                lines.append(line)
            }
        }
        return lines
    }

    static func json(_ events: [OutboxEvent]) -> JSONValue { .array(events.map(json)) }

    private static func json(_ event: OutboxEvent) -> JSONValue {
        .object([
            ("id", .string(event.id)),
            ("type", .string(event.type)),
            ("created_at", .string(time(event.createdAt))),
            ("sequence", .integer(event.sequence)),
            ("account", event.account.map(JSONValue.string) ?? .null),
            ("original_transaction_id", .string(event.originalTransactionID)),
            ("deliveries", .array(event.deliveries.map(json))),
        ])
    }

    private static func json(_ delivery: OutboxEvent.Delivery) -> JSONValue {
        .object([
            ("webhook", .string(delivery.webhook)),
            ("state", .string(delivery.state.rawValue)),
            ("attempts", .integer(Int64(delivery.attempts))),
            (
                "next_attempt_at",
                delivery.state == .pending ? delivery.nextAttemptAt.map { .string(time($0)) } ?? .null : .null
            ),
            ("last_status", delivery.lastStatus.map { .integer(Int64($0)) } ?? .null),
            ("last_error", delivery.lastError.map(JSONValue.string) ?? .null),
            ("delivered_at", delivery.deliveredAt.map { .string(time($0)) } ?? .null),
        ])
    }

    /// `webhooks test`'s one line: `backend: HTTP 200 in 0.04 s: ok`.
    static func answerLine(webhook: String, _ answer: WebhookAnswer) -> String {
        var line = "\(webhook): "
        if let status = answer.status {
            line += "HTTP \(status)"
            if let error = answer.error, !(200...299).contains(status) { line += " (\(error))" }
        } else {
            line += "no answer (\(answer.error ?? "unknown error"))"
        }
        line += " in \(seconds(answer.seconds)) s"
        let body = answer.bodyPrefix.trimmed(of: " \t\r\n")
        if !body.isEmpty { line += ": " + printable(body) }
        return line
    }

    /// What `webhooks replay` takes: ids as the outbox writes them, never anything a terminal would interpret.
    static func isPlausibleEventID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 200 && id.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }

    private static func lastOutcome(_ delivery: OutboxEvent.Delivery) -> String? {
        switch (delivery.lastStatus, delivery.lastError) {
        case (let status?, let error?): "HTTP \(status) (\(printable(error)))"
        case (let status?, nil): "HTTP \(status)"
        case (nil, let error?): printable(error)
        case (nil, nil): nil
        }
    }

    private static func time(_ milliseconds: Int64) -> String {
        ReceiptDate(millisecondsSince1970: milliseconds).rfc3339
    }

    private static func seconds(_ value: Double) -> String {
        let hundredths = Int((max(0, value) * 100).rounded())
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }

    /// A receiver's answer is its own text: control characters would move the operator's terminal.
    static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? " " : $0 }))
    }
}
