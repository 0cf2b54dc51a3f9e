import Foundation
import ReceiptEngine
import Testing

@testable import ReceiptService
import JSONText

struct AppleDateFormatTests {
    private func date(_ text: String) -> ReceiptDate { ReceiptDate(rfc3339: text)! }

    @Test(arguments: [
        // Summer: PDT, UTC-7.
        ("2024-05-01T12:00:00Z", "2024-05-01 12:00:00 Etc/GMT", "1714564800000", "2024-05-01 05:00:00 America/Los_Angeles"),
        // Winter: PST, UTC-8, and the date rolls back a day.
        ("2024-01-15T03:30:15Z", "2024-01-15 03:30:15 Etc/GMT", "1705289415000", "2024-01-14 19:30:15 America/Los_Angeles"),
        // 2024 DST starts 10 March 10:00 UTC (02:00 PST jumps to 03:00 PDT).
        ("2024-03-10T09:59:59Z", "2024-03-10 09:59:59 Etc/GMT", "1710064799000", "2024-03-10 01:59:59 America/Los_Angeles"),
        ("2024-03-10T10:00:00Z", "2024-03-10 10:00:00 Etc/GMT", "1710064800000", "2024-03-10 03:00:00 America/Los_Angeles"),
        // 2024 DST ends 3 November 09:00 UTC (02:00 PDT falls back to 01:00 PST).
        ("2024-11-03T08:59:59Z", "2024-11-03 08:59:59 Etc/GMT", "1730624399000", "2024-11-03 01:59:59 America/Los_Angeles"),
        ("2024-11-03T09:00:00Z", "2024-11-03 09:00:00 Etc/GMT", "1730624400000", "2024-11-03 01:00:00 America/Los_Angeles"),
        // Before 2007 the rules were April to October: 20 March 2006 was still PST.
        ("2006-03-20T12:00:00Z", "2006-03-20 12:00:00 Etc/GMT", "1142856000000", "2006-03-20 04:00:00 America/Los_Angeles"),
        ("2006-10-28T12:00:00Z", "2006-10-28 12:00:00 Etc/GMT", "1162036800000", "2006-10-28 05:00:00 America/Los_Angeles"),
    ])
    func date_rendersAsAppleDoes(rfc3339: String, gmt: String, milliseconds: String, pacific: String) {
        let instant = date(rfc3339)
        #expect(AppleDateFormat.gmt(instant) == gmt)
        #expect(AppleDateFormat.milliseconds(instant) == milliseconds)
        #expect(AppleDateFormat.pacific(instant) == pacific)
    }

    @Test(.enabled(if: TimeZone(identifier: "America/Los_Angeles") != nil, "no zoneinfo for America/Los_Angeles"))
    func pacific_agreesWithZoneinfoFrom2008To2030() throws {
        let zone = try #require(TimeZone(identifier: "America/Los_Angeles"))
        // Every 11h 13m: lands on every hour of the day and near every transition over the years.
        var seconds: Int64 = 1_199_145_600  // 2008-01-01
        var disagreements: [String] = []
        while seconds < 1_893_456_000 {  // 2030-01-01
            let instant = ReceiptDate(millisecondsSince1970: seconds * 1000)
            let offset = Int64(zone.secondsFromGMT(for: instant.date))
            let expected = AppleDateFormat.gmt(ReceiptDate(millisecondsSince1970: (seconds + offset) * 1000))
                .replacingOccurrences(of: "Etc/GMT", with: "America/Los_Angeles")
            if AppleDateFormat.pacific(instant) != expected { disagreements.append(instant.rfc3339) }
            seconds += 11 * 3600 + 13 * 60
        }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(5))")
    }

    @Test func milliseconds_keepsSubsecondPrecisionWhileTextTruncates() {
        let instant = ReceiptDate(millisecondsSince1970: 1_714_564_800_999)
        #expect(AppleDateFormat.milliseconds(instant) == "1714564800999")
        #expect(AppleDateFormat.gmt(instant) == "2024-05-01 12:00:00 Etc/GMT")
    }
}

struct AppleVerifyReceiptTests {
    private func purchase(
        _ transaction: String, original: String, expiresMs: Int64?, cancelled: Bool = false
    ) -> InAppPurchase {
        InAppPurchase(
            quantity: 1, productID: "p", transactionID: transaction,
            purchaseDate: ReceiptDate(millisecondsSince1970: 0), originalTransactionID: original,
            expiresDate: expiresMs.map(ReceiptDate.init(millisecondsSince1970:)), webOrderLineItemID: 5,
            cancellationDate: cancelled ? ReceiptDate(millisecondsSince1970: 1000) : nil)
    }

    @Test func latestReceiptInfo_isRenewalsNewestFirst_andExcludeOldKeepsOnePerOriginal() {
        let purchases = [
            purchase("a1", original: "a1", expiresMs: 100), purchase("b1", original: "b1", expiresMs: 150),
            purchase("consumable", original: "consumable", expiresMs: nil), purchase("a2", original: "a1", expiresMs: 200),
        ]
        let all = AppleVerifyReceipt.latestReceiptInfo(purchases, excludeOld: false).compactMap(\.transactionID)
        #expect(all == ["a2", "b1", "a1"])
        let latest = AppleVerifyReceipt.latestReceiptInfo(purchases, excludeOld: true).compactMap(\.transactionID)
        #expect(latest == ["a2", "b1"])
    }

    @Test func transaction_writesValuesAsStringsAndCancellationWhenCancelled() {
        let json = AppleVerifyReceipt.transaction(purchase("t", original: "o", expiresMs: 2000, cancelled: true))
        #expect(json["quantity"] == .string("1"))
        #expect(json["web_order_line_item_id"] == .string("5"))
        #expect(json["is_trial_period"] == .string("false"))
        #expect(json["is_in_intro_offer_period"] == .string("false"))
        #expect(json["expires_date_ms"] == .string("2000"))
        #expect(json["cancellation_date"] == .string("1970-01-01 00:00:01 Etc/GMT"))
        #expect(json["cancellation_date_pst"] == .string("1969-12-31 16:00:01 America/Los_Angeles"))
        let notCancelled = AppleVerifyReceipt.transaction(purchase("t", original: "o", expiresMs: nil))
        #expect(notCancelled["cancellation_date"] == nil)
        #expect(notCancelled["expires_date"] == nil)
    }

    private func result(_ environment: String, error: ValidationError.Code? = nil) -> ValidationResult {
        ValidationResult(
            error: error.map { ValidationError($0, "x") },
            receipt: Receipt(
                receiptType: environment, bundleID: "com.example.app", applicationVersion: "1",
                creationDate: ReceiptDate(millisecondsSince1970: 0)))
    }

    @Test(arguments: [
        ("Production", nil, AppleVerifyReceipt.Endpoint.production, AppleReceiptStatus.valid),
        ("Xcode", nil, .sandbox, .notAuthenticated),
        ("Xcode", .environmentNotAccepted, .production, .notAuthenticated),
        ("ProductionSandbox", .environmentNotAccepted, .sandbox, .notAuthenticated),
        ("ProductionSandbox", .environmentNotAccepted, .production, .sandboxReceiptSentToProduction),
        ("Production", .environmentNotAccepted, .sandbox, .productionReceiptSentToSandbox),
        ("Production", .deviceHashMismatch, .production, .notAuthenticated),
        ("Production", .bundleIDMismatch, .production, .unknownApp),
        ("Production", .signatureInvalid, .production, .notAuthenticated),
        ("Production", .malformedReceipt, .sandbox, .malformedReceipt),
    ] as [(String, ValidationError.Code?, AppleVerifyReceipt.Endpoint, AppleReceiptStatus)])
    func status_mapsVerdictAndEndpoint(
        environment: String, error: ValidationError.Code?, endpoint: AppleVerifyReceipt.Endpoint,
        expected: AppleReceiptStatus
    ) {
        let status = AppleVerifyReceipt.status(
            for: result(environment, error: error), endpoint: endpoint, password: nil,
            configuration: ServiceConfiguration())
        #expect(status == expected)
    }

    @Test func constantTimeEquals_comparesWholeStrings() {
        #expect(AppleVerifyReceipt.constantTimeEquals("secret", "secret"))
        #expect(!AppleVerifyReceipt.constantTimeEquals("secret", "secreT"))
        #expect(!AppleVerifyReceipt.constantTimeEquals("secret", "secret2"))
        #expect(!AppleVerifyReceipt.constantTimeEquals("", "x"))
    }
}
