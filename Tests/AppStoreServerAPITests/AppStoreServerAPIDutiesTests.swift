import AppStoreServerAPI
import JSONText
import TestSupport
import Testing

/// The calls of a server's duties against the fake, each request compared with what Apple's server library
/// (app-store-server-library-swift, `AppStoreServerAPIClient` and its Codable models) sends for the same call:
/// method, path, query, Content-Type, and the body's members (the optional ones left out when nil).
@Suite struct AppStoreServerAPIDutiesTests {
    /// The one request the fake logged, with a valid token (the fake refuses any token Apple would refuse).
    static func onlyRequest(_ fake: FakeAppStoreServer) throws -> JSONValue {
        let requests = try fake.requests()
        try #require(requests.count == 1)
        #expect(requests[0]["refusal"] == .null)
        // Apple's AppStoreServerAPIJWT: exactly these claims (the fake checked their values and the signature).
        guard case .object(let claims)? = requests[0]["claims"] else { throw FixtureError(description: "no claims logged") }
        #expect(Set(claims.map(\.key)) == ["iss", "iat", "exp", "aud", "bid"])
        #expect(requests[0]["claims"]?["bid"] == .string(FakeAppStoreServer.bundleID))
        return requests[0]
    }

    /// The body's members by name: JSON gives member order no meaning, and Apple's encoder promises none.
    static func bodyMembers(_ request: JSONValue) throws -> [String: JSONValue] {
        guard case .string(let text)? = request["body"] else { throw FixtureError(description: "no body logged") }
        guard case .object(let members) = try JSONValue(parsing: Array(text.utf8)) else {
            throw FixtureError(description: "the body is not a JSON object: \(text)")
        }
        return Dictionary(members.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    static func appleError(_ code: Int64, _ status: Int) -> @Sendable (any Error) -> Bool {
        { error in
            let error = error as? AppStoreServerAPIError
            return error?.appleErrorCode == code && error?.httpStatus == status
        }
    }

    // MARK: Send Consumption Information v2

    @Test func consumption_putsEveryMemberAsApplesConsumptionRequest_andReadsTheEmpty202() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let information = ConsumptionInformation(
            customerConsented: true, consumptionPercentage: 50000, deliveryStatus: "DELIVERED",
            refundPreference: "GRANT_FULL", sampleContentProvided: false)
        try fake.client().sendConsumptionInformation(transactionID: "49571273", information)
        let request = try Self.onlyRequest(fake)
        #expect(request["method"] == .string("PUT"))
        #expect(request["path"] == .string("/inApps/v2/transactions/consumption/49571273"))
        #expect(request["contentType"] == .string("application/json"))
        #expect(
            try Self.bodyMembers(request) == [
                "customerConsented": .bool(true), "consumptionPercentage": .integer(50000),
                "deliveryStatus": .string("DELIVERED"), "refundPreference": .string("GRANT_FULL"),
                "sampleContentProvided": .bool(false),
            ])
    }

    @Test func consumption_withoutOptionalMembers_leavesThemOut() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let information = ConsumptionInformation(
            customerConsented: true, deliveryStatus: "UNDELIVERED_QUALITY_ISSUE", sampleContentProvided: false)
        try fake.client().sendConsumptionInformation(transactionID: "49571273", information)
        #expect(
            try Self.bodyMembers(Self.onlyRequest(fake)) == [
                "customerConsented": .bool(true), "deliveryStatus": .string("UNDELIVERED_QUALITY_ISSUE"),
                "sampleContentProvided": .bool(false),
            ])
    }

    @Test func consumption_refusedByApple_isRejectedWithApplesCode_once() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let information = ConsumptionInformation(
            customerConsented: true, deliveryStatus: "DELIVERED", refundPreference: "GRANT_PRORATED",
            sampleContentProvided: true)
        #expect {
            try fake.client().sendConsumptionInformation(transactionID: "1", information)
        } throws: { error in
            let error = error as? AppStoreServerAPIError
            return error?.code == .rejected && error?.appleErrorCode == 4_000_042
        }
        #expect(try fake.requests().count == 1)
    }

    // MARK: Get Refund History v2

    @Test func refundHistory_getsEveryPageByRevision_withNoBody() throws {
        let signed: JSONValue = .array((0..<5).map { .string("refund-\($0)") })
        let fake = try FakeAppStoreServer(fixture: [("pageSize", .integer(2)), ("refunds", .object([("555555", signed)]))])
        let client = try fake.client()
        var pages: [RefundHistoryPage] = []
        var revision: String?
        repeat {
            let page = try client.refundHistory(transactionID: "555555", revision: revision)
            pages.append(page)
            revision = page.revision
        } while pages.last?.hasMore == true && pages.count < 10
        #expect(pages.map(\.hasMore) == [true, true, false])
        #expect(pages.flatMap(\.signedTransactions) == (0..<5).map { "refund-\($0)" })
        let requests = try fake.requests()
        #expect(requests.map(\.["method"]) == Array(repeating: .string("GET"), count: 3))
        #expect(requests.map(\.["path"]) == Array(repeating: .string("/inApps/v2/refund/lookup/555555"), count: 3))
        #expect(requests[0]["query"] == .object([]))
        #expect(requests[1]["query"] == .object([("revision", .array([.string("rev-2")]))]))
        #expect(requests[2]["query"] == .object([("revision", .array([.string("rev-4")]))]))
        #expect(requests.allSatisfy { $0["body"] == .string("") && $0["contentType"] == .null && $0["refusal"] == .null })
    }

    @Test func refundHistory_ofAnUnknownTransaction_isNotFound() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        #expect {
            try fake.client().refundHistory(transactionID: "404")
        } throws: { error in
            (error as? AppStoreServerAPIError)?.code == .notFound && (error as? AppStoreServerAPIError)?.appleErrorCode == 4_040_010
        }
    }

    // MARK: Extend a Subscription Renewal Date

    @Test func extension_putsApplesExtendRenewalDateRequest_andReadsItsAnswer() throws {
        let fake = try FakeAppStoreServer(fixture: [
            ("extensions", .object([("2000", .object([("effectiveDate", .integer(1_700_000_000_000))]))]))
        ])
        let answer = try fake.client().extendRenewalDate(
            originalTransactionID: "2000",
            RenewalExtension(extendByDays: 45, extendReasonCode: 1, requestIdentifier: "fdf964a4-233b-486c-aac1-97d8d52688ac"))
        #expect(answer.effectiveDate == 1_700_000_000_000)
        #expect(answer.success == true && answer.originalTransactionID == "2000" && answer.webOrderLineItemID == "wol-2000")
        let request = try Self.onlyRequest(fake)
        #expect(request["method"] == .string("PUT"))
        #expect(request["path"] == .string("/inApps/v1/subscriptions/extend/2000"))
        #expect(request["contentType"] == .string("application/json"))
        #expect(
            try Self.bodyMembers(request) == [
                "extendByDays": .integer(45), "extendReasonCode": .integer(1),
                "requestIdentifier": .string("fdf964a4-233b-486c-aac1-97d8d52688ac"),
            ])
    }

    @Test(arguments: [4_030_004, 4_030_005, 4_030_007] as [Int64])
    func extension_refusedForApplesLimits_carriesApplesCode(code: Int64) throws {
        let fake = try FakeAppStoreServer(fixture: [
            ("extensions", .object([("2000", .object([("errorCode", .integer(code))]))]))
        ])
        #expect {
            try fake.client().extendRenewalDate(
                originalTransactionID: "2000", RenewalExtension(extendByDays: 10, extendReasonCode: 3, requestIdentifier: "r-1"))
        } throws: { error in
            Self.appleError(code, 403)(error) && (error as? AppStoreServerAPIError)?.code == .rejected
        }
        #expect(try fake.requests().count == 1)
    }

    @Test func extension_thirdInAYear_isApplesMaximum() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let client = try fake.client()
        for identifier in ["r-1", "r-2"] {
            _ = try client.extendRenewalDate(
                originalTransactionID: "2000", RenewalExtension(extendByDays: 1, extendReasonCode: 0, requestIdentifier: identifier))
        }
        #expect {
            try client.extendRenewalDate(
                originalTransactionID: "2000", RenewalExtension(extendByDays: 1, extendReasonCode: 0, requestIdentifier: "r-3"))
        } throws: { Self.appleError(4_030_005, 403)($0) }
    }

    @Test func extension_ofTooManyDays_isApplesInvalidDays() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        #expect {
            try fake.client().extendRenewalDate(
                originalTransactionID: "2000", RenewalExtension(extendByDays: 91, extendReasonCode: 0, requestIdentifier: "r-1"))
        } throws: { Self.appleError(4_000_009, 400)($0) }
    }

    // MARK: Extend for all active subscribers, and its status

    @Test func massExtension_postsApplesMassRequest_thenItsStatusPathIsProductThenRequest() throws {
        let fake = try FakeAppStoreServer(fixture: [("massStatusPolls", .integer(2))])
        let client = try fake.client()
        let request = MassRenewalExtension(
            RenewalExtension(extendByDays: 7, extendReasonCode: 3, requestIdentifier: "20fba8a0-2b80-4a7d-a17f-85c1854727f8"),
            productID: "com.example.product", storefrontCountryCodes: ["USA", "MEX"])
        #expect(try client.extendRenewalDatesForAllActiveSubscribers(request) == "20fba8a0-2b80-4a7d-a17f-85c1854727f8")
        let first = try client.massRenewalExtensionStatus(
            productID: "com.example.product", requestIdentifier: "20fba8a0-2b80-4a7d-a17f-85c1854727f8")
        #expect(!first.complete)
        let second = try client.massRenewalExtensionStatus(
            productID: "com.example.product", requestIdentifier: "20fba8a0-2b80-4a7d-a17f-85c1854727f8")
        #expect(second.complete && second.succeededCount == 30 && second.failedCount == 2 && second.completeDate != nil)

        let requests = try fake.requests()
        try #require(requests.count == 3)
        #expect(requests[0]["method"] == .string("POST"))
        #expect(requests[0]["path"] == .string("/inApps/v1/subscriptions/extend/mass"))
        #expect(requests[0]["contentType"] == .string("application/json"))
        #expect(
            try Self.bodyMembers(requests[0]) == [
                "extendByDays": .integer(7), "extendReasonCode": .integer(3),
                "requestIdentifier": .string("20fba8a0-2b80-4a7d-a17f-85c1854727f8"),
                "productId": .string("com.example.product"), "storefrontCountryCodes": .array([.string("USA"), .string("MEX")]),
            ])
        #expect(requests[1]["method"] == .string("GET"))
        #expect(
            requests[1]["path"]
                == .string("/inApps/v1/subscriptions/extend/mass/com.example.product/20fba8a0-2b80-4a7d-a17f-85c1854727f8"))
        #expect(requests[1]["body"] == .string("") && requests[1]["contentType"] == .null)
    }

    @Test func massExtension_forEveryStorefront_leavesTheCodesOut() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        let request = MassRenewalExtension(
            RenewalExtension(extendByDays: 7, extendReasonCode: 0, requestIdentifier: "r-1"), productID: "com.example.product")
        _ = try fake.client().extendRenewalDatesForAllActiveSubscribers(request)
        #expect(try Self.bodyMembers(Self.onlyRequest(fake))["storefrontCountryCodes"] == nil)
    }

    // MARK: Set App Account Token

    @Test func appAccountToken_putsTheTokenAsAppleEncodesAUUID() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        try fake.client().setAppAccountToken(originalTransactionID: "49571273", token: "7389A31A-FB6D-4569-A2A6-DB7D85D84813")
        let request = try Self.onlyRequest(fake)
        #expect(request["method"] == .string("PUT"))
        #expect(request["path"] == .string("/inApps/v1/transactions/49571273/appAccountToken"))
        #expect(request["contentType"] == .string("application/json"))
        // Lower case, as Apple's Python library sends it (its Swift library's JSONEncoder would write upper case).
        #expect(try Self.bodyMembers(request) == ["appAccountToken": .string("7389a31a-fb6d-4569-a2a6-db7d85d84813")])
    }

    @Test func appAccountToken_thatIsNoUUID_isApplesInvalidToken() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        #expect {
            try fake.client().setAppAccountToken(originalTransactionID: "1234", token: "not-a-uuid")
        } throws: { Self.appleError(4_000_183, 400)($0) }
    }

    // MARK: Finish Transaction

    @Test func finish_postsWithNoBodyAndNoContentType_andReadsTheEmpty200() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        try fake.client().finishTransaction(transactionID: "1234")
        let request = try Self.onlyRequest(fake)
        #expect(request["method"] == .string("POST"))
        #expect(request["path"] == .string("/inApps/v1/transactions/1234/finish"))
        #expect(request["query"] == .object([]))
        // Apple's library sends a POST with no body (AsyncHTTPClient adds only `Content-Length: 0`); libcurl would add a
        // form Content-Type unless told not to.
        #expect(request["body"] == .string(""))
        #expect(request["contentType"] == .null)
    }

    // MARK: Get App Transaction Info

    @Test func appTransactionInfo_getsTheSignedAppTransactionUntouched() throws {
        let fake = try FakeAppStoreServer(fixture: [("appTransactions", .object([("1234", .string("signed-app-transaction"))]))])
        #expect(try fake.client().appTransactionInfo(transactionID: "1234") == "signed-app-transaction")
        let request = try Self.onlyRequest(fake)
        #expect(request["method"] == .string("GET"))
        #expect(request["path"] == .string("/inApps/v1/transactions/appTransactions/1234"))
        #expect(request["body"] == .string("") && request["contentType"] == .null)
    }

    @Test func appTransactionInfo_unknownToApple_isNotFoundWithApplesCode() throws {
        let fake = try FakeAppStoreServer(fixture: [])
        #expect {
            try fake.client().appTransactionInfo(transactionID: "1234")
        } throws: { error in
            Self.appleError(4_040_019, 404)(error) && (error as? AppStoreServerAPIError)?.code == .notFound
        }
        #expect(try fake.requests().count == 1)
    }
}
