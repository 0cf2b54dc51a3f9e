import ArgumentParser
import Ledger
import ReceiptEngine
import ReceiptService

/// `receiptd consumption list`: Apple's refund questions and what receiptd answered (docs/server-api.md).
struct Consumption: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apple's refund questions (CONSUMPTION_REQUEST) and the answers sent to Apple.",
        discussion: """
            A CONSUMPTION_REQUEST notification opens a request for Apple's 12 hours; receiptd serve sends the \
            backend's answer (PUT /v1/transactions/{id}/consumption) as soon as both are there. list opens the \
            ledger directly, as receiptd store status does, and is safe while receiptd serve runs.
            """ + Store.environment,
        subcommands: [ConsumptionList.self])
}

struct ConsumptionList: ReceiptdCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Prints the refund questions, newest first: state, transaction, reason, what Apple answered.",
        discussion: """
            One line per request: when Apple asked, its state (open, sent, failed, expired), the transaction, \
            Apple's reason, the tries made, and when it was sent with Apple's status, or the last error.
            Exit status: 0 printed (also when there is none); 1 no store configured or the database cannot be \
            reached; 2 a usage error.
            """ + Store.environment)

    @Flag(help: "Only requests still open: inside Apple's 12 hours and not yet sent.")
    var open = false

    @OptionGroup var config: ConfigOption

    func execute() -> Int32 {
        runLedgerCommand("consumption list", configPath: config.config) { (store, ledger) throws(StoreCommandFailure) in
            let now = unixMillisecondsNow()
            let requests: [ConsumptionRequest]
            do throws(LedgerError) {
                requests = try ledger.consumptionRequests(openOnly: open, now: now, limit: 1000)
            } catch {
                throw StoreCommandFailure(message: store.explain(error))
            }
            print(ConsumptionListing.lines(requests, now: now).joined(separator: "\n"))
        }
    }
}

enum ConsumptionListing {
    static func lines(_ requests: [ConsumptionRequest], now: Int64) -> [String] {
        if requests.isEmpty { return ["no consumption requests"] }
        return requests.map { request in
            var line =
                "\(time(request.requestedAt)) \(request.state(at: now).rawValue) transaction \(request.transactionID)"
                + " reason \(request.reason ?? "-") \(request.attempts) "
                + (request.attempts == 1 ? "attempt" : "attempts")
            if request.answer == nil { line += ", no answer yet" }
            if let sentAt = request.sentAt {
                line += ", sent \(time(sentAt)) status \(request.appleStatus.map { String($0) } ?? "-")"
            } else if request.state(at: now) == .open {
                line += ", expires \(time(request.expiresAt))"
            }
            if let code = request.appleErrorCode { line += ", apple error \(code)" }
            if request.sentAt == nil, let error = request.lastError { line += ", last: \(error)" }
            return line
        }
    }

    private static func time(_ milliseconds: Int64) -> String {
        ReceiptDate(millisecondsSince1970: milliseconds).rfc3339
    }
}
