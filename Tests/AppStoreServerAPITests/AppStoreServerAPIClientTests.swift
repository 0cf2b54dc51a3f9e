import AppStoreServerAPI
import Foundation
import JSONText
import TestSupport
import Testing

/// The client against Tests/e2e/fake-app-store-server.py over HTTPS with a test CA: the fake refuses any token Apple
/// would refuse, so every success here is also a well-formed, correctly signed token.
@Suite struct AppStoreServerAPIClientTests {
    static func notifications(_ count: Int, from start: Int64 = 1_700_000_000_000) -> JSONValue {
        .array(
            (0..<count).map { index in
                .object([("signedPayload", .string("payload-\(index)")), ("date", .integer(start + Int64(index) * 1000))])
            })
    }

    @Test func notificationHistory_followsPaginationTokens_andSendsTheSpanAsJSON() throws {
        let fake = try FakeAppStoreServer(fixture: [("pageSize", .integer(2)), ("notifications", Self.notifications(3))])
        let client = try fake.client()
        let query = NotificationHistoryQuery(startDate: 1_600_000_000_000, endDate: 1_800_000_000_000)
        let first = try client.notificationHistory(query)
        #expect(first.notifications.map(\.signedPayload) == ["payload-0", "payload-1"])
        #expect(first.hasMore)
        let second = try client.notificationHistory(query, paginationToken: first.paginationToken ?? "")
        #expect(second.notifications.map(\.signedPayload) == ["payload-2"])
        #expect(!second.hasMore)

        let requests = try fake.requests()
        #expect(requests.count == 2)
        #expect(requests.allSatisfy { $0["method"] == .string("POST") && $0["refusal"] == .null })
        #expect(requests[0]["contentType"] == .string("application/json"))
        let body = try JSONValue(parsing: Array(try #require(requests[0]["body"].flatMap { if case .string(let s) = $0 { s } else { nil } }).utf8))
        #expect(body == .object([("startDate", .integer(1_600_000_000_000)), ("endDate", .integer(1_800_000_000_000))]))
        #expect(requests[1]["query"]?["paginationToken"] == .array([.string("page-2")]))
    }

    @Test func transactionHistory_followsRevisionsUntilNoMore() throws {
        let signed: JSONValue = .array((0..<5).map { .string("transaction-\($0)") })
        let fake = try FakeAppStoreServer(fixture: [("pageSize", .integer(2)), ("transactions", .object([("1000", signed)]))])
        let pages = try fake.client().completeTransactionHistory(transactionID: "1000", query: TransactionHistoryQuery(sort: "ASCENDING"))
        #expect(pages.count == 3)
        #expect(pages.flatMap(\.signedTransactions) == (0..<5).map { "transaction-\($0)" })
        let requests = try fake.requests()
        #expect(requests.map { $0["path"] } == Array(repeating: .string("/inApps/v2/history/1000"), count: 3))
        #expect(requests[0]["query"]?["revision"] == nil)
        #expect(requests[1]["query"]?["revision"] == .array([.string("rev-2")]))
        #expect(requests[2]["query"]?["sort"] == .array([.string("ASCENDING")]))
    }

    @Test func everyOtherEndpoint_returnsApplesSignedStringsUntouched() throws {
        let last: JSONValue = .object([
            ("status", .integer(1)), ("originalTransactionId", .string("1000")),
            ("signedTransactionInfo", .string("transaction-info")), ("signedRenewalInfo", .string("renewal-info")),
        ])
        let fake = try FakeAppStoreServer(fixture: [
            ("transactions", .object([("1000", .array([.string("transaction-0")]))])),
            ("subscriptions", .object([("1000", .array([.object([("subscriptionGroupIdentifier", .string("21000")), ("lastTransactions", .array([last]))])]))])),
            ("orders", .object([("MQR7Z2JTKS", .array([.string("order-transaction")]))])),
            ("testNotification", .string("test-payload")),
        ])
        let client = try fake.client()
        #expect(try client.transactionInfo(transactionID: "1000") == "transaction-0")
        let statuses = try client.subscriptionStatuses(transactionID: "1000")
        #expect(statuses.groups.first?.lastTransactions.first?.signedRenewalInfo == "renewal-info")
        #expect(statuses.groups.first?.subscriptionGroupIdentifier == "21000")
        let order = try client.lookUpOrder(orderID: "MQR7Z2JTKS")
        #expect(order.isValid && order.signedTransactions == ["order-transaction"])
        #expect(try !client.lookUpOrder(orderID: "UNKNOWN").isValid)
        let token = try client.requestTestNotification()
        let status = try client.testNotificationStatus(token: token)
        #expect(status.signedPayload == "test-payload")
        #expect(status.sendAttempts.first?.sendAttemptResult == "SUCCESS")
        let requests = try fake.requests()
        #expect(requests.allSatisfy { $0["refusal"] == .null })
        #expect(requests.map { $0["path"] }.contains(.string("/inApps/v1/lookup/MQR7Z2JTKS")))
    }

    @Test func dotSegmentIDs_stayInTheirSegment() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let client = try fake.client()
        for id in [".", ".."] { _ = try? client.lookUpOrder(orderID: id) }
        let paths = try fake.requests().map(\.["path"])
        #expect(paths == [.string("/inApps/v1/lookup/%2E"), .string("/inApps/v1/lookup/%2E%2E")])
    }

    @Test func notFound_carriesApplesErrorCode_andIsNotRetried() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        #expect {
            try fake.client().transactionInfo(transactionID: "999")
        } throws: { error in
            let error = error as? AppStoreServerAPIError
            return error?.code == .notFound && error?.appleErrorCode == 4_040_010 && error?.httpStatus == 404
        }
        #expect(try fake.requests().count == 1)
    }

    @Test func badRequest_isRejectedOnceWithApplesCode() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let query = NotificationHistoryQuery(startDate: 2, endDate: 1)
        #expect {
            try fake.client().notificationHistory(query)
        } throws: { error in
            (error as? AppStoreServerAPIError)?.code == .rejected && (error as? AppStoreServerAPIError)?.appleErrorCode == 4_000_013
        }
        #expect(try fake.requests().count == 1)
    }

    @Test func serverErrors_areRetried_untilAnAnswer() throws {
        let faults: JSONValue = .object([("/inApps/v1/lookup/A1", .array([.object([("status", .integer(500))]), .object([("status", .integer(503))])]))])
        let fake = try FakeAppStoreServer(fixture: [("orders", .object([("A1", .array([]))])), ("faults", faults)])
        #expect(try fake.client().lookUpOrder(orderID: "A1").isValid)
        #expect(try fake.requests().count == 3)
    }

    @Test func serverErrors_beyondTheAttempts_areUnavailable() throws {
        let fault: JSONValue = .object([("status", .integer(500))])
        let fake = try FakeAppStoreServer(fixture: [("faults", .object([("/inApps/v1/lookup/A1", .array([fault, fault, fault, fault]))]))])
        #expect {
            try fake.client().lookUpOrder(orderID: "A1")
        } throws: { error in
            let error = error as? AppStoreServerAPIError
            return error?.code == .unavailable && error?.attempts == 3 && error?.appleErrorCode == 5_000_000
        }
    }

    @Test func rateLimit_waitsAsRetryAfterSays_thenSucceeds() throws {
        let fault: JSONValue = .object([("status", .integer(429)), ("retryAfter", .string("0"))])
        let fake = try FakeAppStoreServer(fixture: [("orders", .object([("A1", .array([]))])), ("faults", .object([("/inApps/v1/lookup/A1", .array([fault]))]))])
        #expect(try fake.client().lookUpOrder(orderID: "A1").isValid)
        #expect(try fake.requests().count == 2)
    }

    @Test func hangingServer_timesOut_andTheRetryGetsTheAnswer() throws {
        let fault: JSONValue = .object([("hang", .integer(4))])
        let fake = try FakeAppStoreServer(fixture: [("orders", .object([("A1", .array([]))])), ("faults", .object([("/inApps/v1/lookup/A1", .array([fault]))]))])
        #expect(try fake.client(timeoutSeconds: 1).lookUpOrder(orderID: "A1").isValid)
    }

    @Test func refusedToken_isUnauthorized_namesTheSettings_andIsNotRetried() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let wrongKey = try fake.key(keyID: "OTHERKEY99")
        let client = try fake.client(key: wrongKey)
        do {
            _ = try client.transactionInfo(transactionID: "1")
            Issue.record("a token with the wrong key id was accepted")
        } catch {
            #expect(error.code == .unauthorized)
            #expect(error.message.contains("key_id") && error.message.contains("issuer_id") && error.message.contains("private_key_file"))
        }
        #expect(try fake.requests().count == 1)
    }

    @Test func serverOutsideTheTrustedCAs_isUnavailable() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        var once = RetryPolicy.fast
        once.maximumAttempts = 1
        let system = AppStoreServerAPIClient(
            baseURL: fake.url, environment: .production, key: try fake.key(), caFile: nil, maximumRequestsPerSecond: 0,
            retryPolicy: once)
        #expect {
            try system.transactionInfo(transactionID: "1")
        } throws: { error in
            (error as? AppStoreServerAPIError)?.code == .unavailable
        }
        #expect(try fake.requests().isEmpty)
    }

    @Test func fivePageSync_opensOneConnection() throws {
        let signed: JSONValue = .array((0..<5).map { .string("transaction-\($0)") })
        let fake = try FakeAppStoreServer(fixture: [("pageSize", .integer(1)), ("transactions", .object([("1000", signed)]))])
        let client = try fake.client()
        let pages = try client.completeTransactionHistory(transactionID: "1000")
        #expect(pages.count == 5)
        #expect(client.connectionsOpened == 1)
        #expect(fake.connectionsAccepted == 1)
    }

    @Test(arguments: ["Retry-After: 7\r\n", "retry-after:\t7 \r\n", "RETRY-AFTER:7"])
    func retryAfterHeader_isTrimmedOfSpacesTabsAndLineEnds(line: String) {
        #expect(HeaderLine.value(of: "retry-after", in: Array(line.utf8)) == "7")
        #expect(HeaderLine.value(of: "content-type", in: Array(line.utf8)) == nil)
    }

    @Test func rateLimit_waitsTheSecondsRetryAfterAsks() throws {
        let fault: JSONValue = .object([("status", .integer(429)), ("retryAfter", .string("7"))])
        let fake = try FakeAppStoreServer(fixture: [
            ("orders", .object([("A1", .array([]))])), ("faults", .object([("/inApps/v1/lookup/A1", .array([fault]))])),
        ])
        let waits = Waits()
        var policy = RetryPolicy.fast
        policy.maximumRetryAfterSeconds = 60
        let client = AppStoreServerAPIClient(
            baseURL: fake.url, environment: .production, key: try fake.key(), caFile: fake.caFile,
            maximumRequestsPerSecond: 0, retryPolicy: policy, sleep: { waits.append($0) })
        #expect(try client.lookUpOrder(orderID: "A1").isValid)
        #expect(waits.all == [7])
    }

    @Test func rateLimit_longerThanTheDeadline_isBusyAtOnce_withApplesWait() throws {
        let fake = try FakeAppStoreServer(fixture: [
            ("always", .object([("status", .integer(429)), ("retryAfter", .string("7"))])),
        ])
        let waits = Waits()
        let client = AppStoreServerAPIClient(
            baseURL: fake.url, environment: .production, key: try fake.key(), caFile: fake.caFile,
            maximumRequestsPerSecond: 0, retryPolicy: .fast, sleep: { waits.append($0) }
        ).bounded(until: wallClockSeconds() + 5)
        #expect {
            try client.lookUpOrder(orderID: "A1")
        } throws: { error in
            let error = error as? AppStoreServerAPIError
            return error?.code == .busy && error?.retryAfterSeconds == 7 && error?.appleErrorCode == 4_290_000
                && error?.attempts == 1
        }
        #expect(waits.all.isEmpty)
    }

    @Test func hungServer_failsWithinTheDeadline_everyRetryIncluded() throws {
        let fake = try FakeAppStoreServer(fixture: [("always", .object([("hang", .integer(30))]))])
        let client = AppStoreServerAPIClient(
            baseURL: fake.url, environment: .production, key: try fake.key(), caFile: fake.caFile, timeoutSeconds: 10,
            maximumRequestsPerSecond: 0, retryPolicy: .fast
        ).bounded(until: wallClockSeconds() + 1)
        let started = ContinuousClock.now
        #expect {
            try client.lookUpOrder(orderID: "A1")
        } throws: { error in
            (error as? AppStoreServerAPIError)?.code == .unavailable
        }
        #expect(ContinuousClock.now - started < .seconds(2))
    }

    @Test func certificateError_isNotRetried() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let system = AppStoreServerAPIClient(
            baseURL: fake.url, environment: .production, key: try fake.key(), caFile: nil, maximumRequestsPerSecond: 0,
            retryPolicy: .fast)
        #expect {
            try system.transactionInfo(transactionID: "1")
        } throws: { error in
            let error = error as? AppStoreServerAPIError
            return error?.code == .unavailable && error?.attempts == 1
        }
        #expect(try fake.requests().isEmpty)
    }

    @Test func unresolvableName_isNotRetried() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let client = AppStoreServerAPIClient(
            baseURL: "https://receiptd-test.invalid", environment: .production, key: try fake.key(),
            maximumRequestsPerSecond: 0, retryPolicy: .fast)
        #expect {
            try client.transactionInfo(transactionID: "1")
        } throws: { error in
            let error = error as? AppStoreServerAPIError
            return error?.code == .unavailable && error?.attempts == 1
        }
    }

    @Test func applesErrorCode_isInTheMessage() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let client = try fake.client()
        do {
            _ = try client.transactionInfo(transactionID: "999")
            Issue.record("an unknown transaction was found")
        } catch {
            #expect(error.appleErrorCode == 4_040_010)
            #expect(error.appleSaid == "Apple: 4040010 transaction id not found")
            #expect(error.description.hasSuffix("Apple: 4040010 transaction id not found"))
        }
    }
}

/// The waits a client asked for, in order.
private final class Waits: @unchecked Sendable {
    private let lock = NSLock()
    private var seconds: [Double] = []
    func append(_ wait: Double) { lock.withLock { seconds.append(wait) } }
    var all: [Double] { lock.withLock { seconds } }
}
