import CryptoFloor
import JSONText
import Ledger
import Testing

@testable import ReceiptService
@testable import receiptd

/// `receiptd webhooks secret new|list|replay|test`: what they print and how they exit, without a server.
struct WebhooksCommandTests {
    static let pending = OutboxEvent.Delivery(
        webhook: "backend", state: .pending, attempts: 2, nextAttemptAt: 1_714_564_860_000, lastStatus: 500,
        lastError: "HTTP 500", deliveredAt: nil)
    static let delivered = OutboxEvent.Delivery(
        webhook: "audit", state: .delivered, attempts: 1, nextAttemptAt: nil, lastStatus: 200, lastError: nil,
        deliveredAt: 1_714_564_801_000)
    static let events = [
        OutboxEvent(
            id: "evt_2", type: "RENEWAL", account: "alice", originalTransactionID: "7000", stream: "alice", sequence: 2,
            createdAt: 1_714_564_800_000, body: "{}", deliveries: [pending, delivered]),
        OutboxEvent(
            id: "evt_1", type: "INITIAL_PURCHASE", account: nil, originalTransactionID: "8000", stream: "otx:8000",
            sequence: 1, createdAt: 1_714_564_700_000, body: "{}", deliveries: [delivered]),
    ]

    @Test func secretNew_printsThe32BytesAsUnpaddedBase64url() {
        var lines: [String] = []
        let bytes = [UInt8](repeating: 0xFB, count: 31) + [0xFF]
        let status = WebhooksSecretNew().execute(
            output: { lines.append($0) },
            randomBytes: { count in
                #expect(count == 32)
                return bytes
            })
        #expect(status == ExitStatus.success)
        #expect(lines.count == 1)
        let secret = lines.first ?? ""
        #expect(secret.utf8.count == 43)
        #expect(!secret.contains("=") && !secret.contains("+") && !secret.contains("/"))
        #expect(Base64.decode(Array(secret.utf8), alphabet: .url) == bytes)
    }

    @Test func secretNew_fromTheKernel_differsEachTime() {
        var secrets: [String] = []
        for _ in 0..<2 {
            _ = WebhooksSecretNew().execute(output: { secrets.append($0) }, randomBytes: systemRandomBytes)
        }
        #expect(secrets.count == 2 && secrets[0] != secrets[1])
    }

    @Test(arguments: [
        [String](), ["--failed", "evt_1"], ["--failed", "--since", "2026-11-01"], ["evt_1", "--since", "1793491200"],
        ["--since", "yesterday"], ["--since", "2026-13-01"], ["evt 1"], ["--bogus"],
    ])
    func replay_withoutExactlyOneForm_isAUsageError(arguments: [String]) {
        #expect(runReceiptd(["webhooks", "replay"] + arguments) == ExitStatus.usage)
    }

    @Test(arguments: [
        ["list", "--status", "lost"], ["list", "--limit", "0"], ["list", "--account", ""], ["test"], ["secret"],
        ["secret", "new", "extra"], ["frobnicate"], [],
    ])
    func usageMistakes_exitTwo(arguments: [String]) {
        #expect(runReceiptd(["webhooks"] + arguments) == ExitStatus.usage)
    }

    @Test func replay_parsesEachForm() throws {
        #expect(try parseCommand(WebhooksReplay.self, ["--failed"]).get().replay == .failed)
        #expect(try parseCommand(WebhooksReplay.self, ["evt_1", "evt_2"]).get().replay == .events(["evt_1", "evt_2"]))
        #expect(
            try parseCommand(WebhooksReplay.self, ["--since", "1793491200"]).get().replay == .since(1_793_491_200_000))
        #expect(
            try parseCommand(WebhooksReplay.self, ["--since", "2026-11-01"]).get().replay == .since(1_793_491_200_000))
        #expect(
            try parseCommand(WebhooksReplay.self, ["--since", "2026-11-01T01:00:00+01:00"]).get().replay
                == .since(1_793_491_200_000))
    }

    @Test func replay_withoutAStore_exitsOne() {
        #expect(
            runReceiptd(["webhooks", "replay", "--failed", "--config", "/dev/null/none.json"]) == ExitStatus.failure)
    }

    @Test func test_ofAnUnknownName_isAUsageError_namingTheConfiguredOnes() throws {
        var configuration = ServiceConfiguration()
        configuration.webhooks = [Self.webhook("backend"), Self.webhook("audit")]
        var errors: [String] = []
        let command = try parseCommand(WebhooksTest.self, ["crm"]).get()
        let status = command.execute(in: configuration, now: 0, output: { _ in }, error: { errors.append($0) })
        #expect(status == ExitStatus.usage)
        #expect(errors.count == 1 && errors[0].contains("backend, audit"))
    }

    @Test func test_ofAReceiverThatCannotBeReached_exitsOne() throws {
        var configuration = ServiceConfiguration()
        configuration.webhooks = [Self.webhook("backend")]
        var lines: [String] = []
        let command = try parseCommand(WebhooksTest.self, ["backend"]).get()
        let status = command.execute(in: configuration, now: 0, output: { lines.append($0) }, error: { _ in })
        #expect(status == ExitStatus.failure)
        #expect(lines.count == 1 && lines[0].hasPrefix("backend: no answer"))
    }

    @Test func list_printsEachEventThenEachDelivery() {
        let lines = OutboxListing.lines(Self.events)
        #expect(lines.count == 5)
        #expect(
            lines[0].hasPrefix("evt_2 RENEWAL 2024-05-01T12:00:00") && lines[0].hasSuffix("account alice sequence 2"))
        #expect(lines[1].hasPrefix("  backend: pending, 2 attempts, next try 2024-05-01T12:01:00"))
        #expect(lines[1].hasSuffix("last: HTTP 500 (HTTP 500)"))
        #expect(lines[2].hasPrefix("  audit: delivered, 1 attempt, delivered 2024-05-01T12:00:01"))
        #expect(lines[3].hasSuffix("original 8000 sequence 1"))
        #expect(OutboxListing.lines([]) == ["no events"])
    }

    @Test func listJSON_writtenAPageAtATime_isTheWholeArraysText() {
        var whole = OutboxListing.json(Self.events).serialized(pretty: true)
        whole.append(0x0A)
        for split in 0...Self.events.count {
            var array = OutboxListing.JSONArray()
            let first = array.append(Array(Self.events.prefix(split)))
            let text = first + array.append(Array(Self.events.dropFirst(split))) + array.end()
            #expect(String(decoding: text, as: UTF8.self) == String(decoding: whole, as: UTF8.self), "split \(split)")
        }
        var empty = OutboxListing.json([]).serialized(pretty: true)
        empty.append(0x0A)
        #expect(OutboxListing.JSONArray().end() == empty)
    }

    @Test func listJSON_keepsItsKeys() throws {
        let json = OutboxListing.json(Self.events)
        guard case .object(let event)? = json[0] else {
            Issue.record("not an array of objects")
            return
        }
        #expect(
            event.map(\.key) == [
                "id", "type", "created_at", "sequence", "account", "original_transaction_id", "deliveries",
            ])
        #expect(json[0]?["deliveries"]?[0]?["state"] == .string("pending"))
        #expect(json[0]?["deliveries"]?[0]?["last_status"] == .integer(500))
        #expect(json[0]?["deliveries"]?[0]?["next_attempt_at"] != .null)
        #expect(json[0]?["deliveries"]?[1]?["next_attempt_at"] == .null)
        #expect(json[1]?["account"] == .null)
        guard case .object(let delivery)? = json[0]?["deliveries"]?[0] else { return }
        #expect(
            delivery.map(\.key)
                == ["webhook", "state", "attempts", "next_attempt_at", "last_status", "last_error", "delivered_at"])
    }

    @Test func testAnswer_isOneLine_withoutTheReceiversControlCharacters() {
        let ok = OutboxListing.answerLine(
            webhook: "backend", WebhookAnswer(status: 200, error: nil, bodyPrefix: "ok\n\u{1B}[2J", seconds: 0.042))
        #expect(ok == "backend: HTTP 200 in 0.04 s: ok  [2J")
        let down = OutboxListing.answerLine(
            webhook: "backend", WebhookAnswer(status: nil, error: "connection refused", bodyPrefix: "", seconds: 0))
        #expect(down == "backend: no answer (connection refused) in 0.00 s")
    }

    static func webhook(_ name: String) -> Webhook {
        Webhook(
            name: name, url: "http://127.0.0.1:1/hooks", secretFile: "secret", secret: WebhookSecret(Array("s".utf8)),
            timeout: 2, allowHTTP: true)
    }
}
