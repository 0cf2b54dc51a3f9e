import Ledger
import Testing

@testable import ReceiptService

/// The signature and the retry schedule of webhook deliveries (issue 25).
struct WebhookSignatureTests {
    /// Computed outside receiptd: `printf '1700000000.{"id":"evt_1","type":"TEST"}' | openssl dgst -sha256 -hmac
    /// 'whsec_test-secret'` (and Python's `hmac` agrees).
    @Test func signature_matchesAVectorComputedByOpenSSL() {
        let header = WebhookSignature.header(
            secret: WebhookSecret(Array("whsec_test-secret".utf8)), unixSeconds: 1_700_000_000,
            body: Array(#"{"id":"evt_1","type":"TEST"}"#.utf8))
        #expect(header == "t=1700000000,v1=a6c8784ac3c769c83f647078d003f6a83e80689baa4b1be6bc0adb5a599c1f8b")
    }

    @Test func signature_changesWithTheTime_theBody_andTheSecret() {
        let secret = WebhookSecret(Array("s".utf8))
        let base = WebhookSignature.v1(secret: secret, unixSeconds: 1, body: [1])
        #expect(base != WebhookSignature.v1(secret: secret, unixSeconds: 2, body: [1]))
        #expect(base != WebhookSignature.v1(secret: secret, unixSeconds: 1, body: [2]))
        #expect(base != WebhookSignature.v1(secret: WebhookSecret(Array("t".utf8)), unixSeconds: 1, body: [1]))
    }

    @Test(arguments: [
        // (attempts before, random, pause in ms)
        (0, 0.5, 10_000), (1, 0.5, 20_000), (2, 0.5, 40_000), (5, 0.5, 320_000), (8, 0.5, 2_560_000),
        (9, 0.5, 3_600_000), (60, 0.5, 3_600_000), (0, 0.0, 8_000), (0, 0.999_999_999, 12_000), (3, 0.0, 64_000),
        (3, 1.0, 96_000), (8, 1.0, 3_072_000), (8, 0.0, 2_048_000), (9, 0.0, 3_600_000),
    ])
    func backOff_isTenSecondsDoubling_withTwentyPercentJitter_cappedAtAnHour(
        attempts: Int, random: Double, pause: Int64
    ) {
        #expect(WebhookRetrySchedule().pause(afterAttempts: attempts, random: random) == pause)
    }

    @Test func retries_lastSeventyTwoHours_thenFail() {
        let schedule = WebhookRetrySchedule()
        let created: Int64 = 1_000_000
        let window: Int64 = 72 * 3_600_000
        #expect(
            schedule.result(afterAttempts: 0, createdAt: created, now: created + 1, status: 500, error: "status 500", random: 0.5)
                == .retry(at: created + 10_001, status: 500, error: "status 500"))
        // The last try falls on the window's end, not an hour after it.
        #expect(
            schedule.result(afterAttempts: 20, createdAt: created, now: created + window - 60_000, status: nil, error: "e", random: 0.5)
                == .retry(at: created + window, status: nil, error: "e"))
        #expect(
            schedule.result(afterAttempts: 21, createdAt: created, now: created + window, status: nil, error: "e", random: 0.5)
                == .failed(status: nil, error: "e"))
    }

    @Test func schedule_fromTheFirstTry_reachesTheWindowsEnd_thenFails() {
        let schedule = WebhookRetrySchedule()
        var now: Int64 = 0
        var attempts = 0
        var pauses: [Int64] = []
        while case .retry(let at, _, _) = schedule.result(
            afterAttempts: attempts, createdAt: 0, now: now, status: 503, error: "status 503", random: 0.5)
        {
            pauses.append(at - now)
            now = at
            attempts += 1
        }
        #expect(now == schedule.window)
        #expect(pauses.prefix(3) == [10_000, 20_000, 40_000])
        #expect(pauses.max() == 3_600_000)
        #expect(attempts > 70 && attempts < 90)
    }

    @Test func testEvent_hasEveryMember_andAStableShape() {
        let body = String(decoding: Webhook.testEventBody(id: "evt_test_1", at: 1_764_216_636_007), as: UTF8.self)
        #expect(
            body == #"{"id":"evt_test_1","type":"TEST","created_at":"2025-11-27T04:10:36.007Z","sequence":0,"#
                + #""environment":null,"app":null,"account":null,"entitlements":[],"product_id":null,"#
                + #""original_transaction_id":null,"transaction":null,"subscription":null,"notification":null}"#)
        #expect(Webhook.testEventID().hasPrefix("evt_test_"))
        #expect(Webhook.testEventID() != Webhook.testEventID())
    }
}
