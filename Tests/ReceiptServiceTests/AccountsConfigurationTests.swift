import Foundation
import JSONText
import Ledger
import ReceiptEngine
import Testing

@testable import ReceiptService

/// `apps[].entitlements`, `apps[].non_renewing_durations`, `apps[].restore_behavior` (issue 24), and the periods.
struct AccountsConfigurationTests {
    private func parse(app members: String) throws(ConfigurationError) -> ServiceConfiguration {
        let json = #"{"apps": [{"bundle_id": "com.example.app", \#(members)}]}"#
        return try ServiceConfiguration.parse(Array(json.utf8), path: "x.json", baseDirectory: ".")
    }

    private func failure(app members: String) -> ConfigurationError? {
        do {
            _ = try parse(app: members)
            return nil
        } catch {
            return error
        }
    }

    @Test func accountKeys_areRead() throws {
        let configuration = try parse(app: """
            "entitlements": {"pro": ["com.example.pro.monthly", "com.example.pro.lifetime"],
                             "no_ads": ["com.example.noads", "com.example.pro.lifetime"]},
            "non_renewing_durations": {"com.example.pass": "P1M", "com.example.day": "PT24H"},
            "restore_behavior": "transfer_if_no_active"
            """)
        let app = try #require(configuration.apps.first)
        #expect(app.entitlements == [
            "pro": ["com.example.pro.monthly", "com.example.pro.lifetime"],
            "no_ads": ["com.example.noads", "com.example.pro.lifetime"],
        ])
        #expect(app.nonRenewingDurations == [
            "com.example.pass": ISO8601Period(months: 1), "com.example.day": ISO8601Period(hours: 24),
        ])
        #expect(app.restoreBehavior == .transferIfNoActive)
    }

    @Test func withoutAccountKeys_nothingIsGranted_andRestoresTransfer() throws {
        let app = try #require(try parse(app: #""versions": []"#).apps.first)
        #expect(app.entitlements.isEmpty && app.nonRenewingDurations.isEmpty)
        #expect(app.restoreBehavior == .transfer)
    }

    @Test(arguments: [
        (#""entitlements": {"pro!": ["a"]}"#, #"apps[0].entitlements["pro!"]"#),
        (#""entitlements": {"": ["a"]}"#, #"apps[0].entitlements[""]"#),
        (#""entitlements": {"\#(String(repeating: "a", count: 65))": ["a"]}"#, "apps[0].entitlements[\"aaaa"),
        (#""entitlements": {"pro": []}"#, #"apps[0].entitlements["pro"]"#),
        (#""entitlements": {"pro": "com.example.pro"}"#, #"apps[0].entitlements["pro"]"#),
        (#""entitlements": {"pro": ["a", ""]}"#, #"apps[0].entitlements["pro"][1]"#),
        (#""entitlements": {"pro": ["a", 7]}"#, #"apps[0].entitlements["pro"][1]"#),
        (#""entitlements": ["pro"]"#, "apps[0].entitlements:"),
        (#""non_renewing_durations": {"com.example.pass": "1M"}"#, #"apps[0].non_renewing_durations["com.example.pass"]"#),
        (#""non_renewing_durations": {"com.example.pass": "P1.5M"}"#, #"apps[0].non_renewing_durations["com.example.pass"]"#),
        (#""non_renewing_durations": {"com.example.pass": "P-1M"}"#, #"apps[0].non_renewing_durations["com.example.pass"]"#),
        (#""non_renewing_durations": {"com.example.pass": 30}"#, #"apps[0].non_renewing_durations["com.example.pass"]"#),
        (#""non_renewing_durations": {"": "P1M"}"#, #"apps[0].non_renewing_durations[""]"#),
        (#""non_renewing_durations": "P1M""#, "apps[0].non_renewing_durations:"),
        (#""restore_behavior": "keep""#, "apps[0].restore_behavior:"),
        (#""restore_behavior": null"#, "apps[0].restore_behavior:"),
    ])
    func badAccountValues_stopTheStart_namingTheKey(members: String, key: String) {
        let error = failure(app: members)
        #expect(error?.code == .invalidValue)
        #expect(error?.message.contains("config x.json: \(key)") == true, "\(error?.message ?? "no error")")
    }

    @Test func entitlementNameMessage_saysWhatNamesAre() {
        let error = failure(app: #""entitlements": {"pro!": ["a"]}"#)
        #expect(
            error?.message
                == #"config x.json: apps[0].entitlements["pro!"]: entitlement names are 1 to 64 of [0-9A-Za-z._-]"#)
    }

    @Test func unknownKeyBesideTheAccountKeys_isStillRefused() {
        #expect(failure(app: #""entitlements": {}, "entitlement": {}"#)?.code == .unknownKey)
    }

    @Test func configREADMEsAccountExample_isAcceptedAsWritten() throws {
        let readme = try String(contentsOfFile: #filePath.replacingOccurrences(
            of: "Tests/ReceiptServiceTests/AccountsConfigurationTests.swift", with: "Config/README.md"), encoding: .utf8)
        let marker = "<!-- accounts example -->\n```json\n"
        let start = try #require(readme.range(of: marker)).upperBound
        let end = try #require(readme.range(of: "\n```", range: start..<readme.endIndex)).lowerBound
        let configuration = try ServiceConfiguration.parse(
            Array(readme[start..<end].utf8), path: "Config/README.md", baseDirectory: ".")
        let app = try #require(configuration.apps.first)
        #expect(!app.entitlements.isEmpty && !app.nonRenewingDurations.isEmpty)
    }
}

/// ISO 8601 periods, added in UTC calendar arithmetic.
struct AccountsPeriodTests {
    @Test(arguments: [
        ("P1M", ISO8601Period(months: 1)), ("P1Y", ISO8601Period(years: 1)), ("P2W", ISO8601Period(weeks: 2)),
        ("P7D", ISO8601Period(days: 7)), ("PT36H", ISO8601Period(hours: 36)), ("PT90M", ISO8601Period(minutes: 90)),
        ("PT45S", ISO8601Period(seconds: 45)), ("P0D", ISO8601Period()),
        ("P1Y2M3W4DT5H6M7S", ISO8601Period(years: 1, months: 2, weeks: 3, days: 4, hours: 5, minutes: 6, seconds: 7)),
    ])
    func validPeriods_parse(text: String, period: ISO8601Period) {
        #expect(ISO8601Period.parse(text) == period)
    }

    @Test(arguments: [
        "", "P", "PT", "P1DT", "1M", "p1m", "P1", "P1.5M", "P1,5M", "P-1M", "P+1M", "P1M1Y", "P1D1M", "P1Y1Y",
        "P1H", "PT1D", "PT1S1M", "P1MT", "P1M ", " P1M", "PT1HT1M", "P1000001D", "P99999999999999999999Y",
    ])
    func invalidPeriods_areRefused(text: String) {
        #expect(ISO8601Period.parse(text) == nil)
    }

    private func millis(_ text: String) -> Int64 { ReceiptDateText.milliseconds(text) }

    @Test(arguments: [
        ("2025-01-31T10:00:00Z", "P1M", "2025-02-28T10:00:00Z"),
        ("2024-01-31T10:00:00Z", "P1M", "2024-02-29T10:00:00Z"),
        ("2024-02-29T00:00:00Z", "P1Y", "2025-02-28T00:00:00Z"),
        ("2024-02-29T00:00:00Z", "P4Y", "2028-02-29T00:00:00Z"),
        ("2025-03-31T00:00:00Z", "P1M", "2025-04-30T00:00:00Z"),
        ("2025-12-31T23:30:00Z", "PT1H", "2026-01-01T00:30:00Z"),
        ("2025-01-01T00:00:00Z", "P1W", "2025-01-08T00:00:00Z"),
        ("2025-01-01T00:00:00Z", "P1Y2M3DT4H5M6S", "2026-03-04T04:05:06Z"),
    ])
    func adding_followsTheCalendar(start: String, period: String, end: String) throws {
        let period = try #require(ISO8601Period.parse(period))
        #expect(period.adding(to: millis(start)) == millis(end))
    }

    @Test func adding_keepsMilliseconds() throws {
        let start = ReceiptDateText.milliseconds("2025-01-31T10:00:00Z") + 123
        #expect(ISO8601Period(days: 1).adding(to: start) == start + 86_400_000)
    }

    @Test func largestPeriod_fromAnyDate_neitherTrapsNorGoesBackwards() {
        let largest = ISO8601Period(
            years: ISO8601Period.largestComponent, months: ISO8601Period.largestComponent,
            weeks: ISO8601Period.largestComponent, days: ISO8601Period.largestComponent,
            hours: ISO8601Period.largestComponent, minutes: ISO8601Period.largestComponent,
            seconds: ISO8601Period.largestComponent)
        for start: Int64 in [0, 1_735_689_600_000, -62_000_000_000_000, 250_000_000_000_000] {
            #expect(largest.adding(to: start) > start)
        }
    }
}

enum ReceiptDateText {
    static func milliseconds(_ text: String) -> Int64 { ReceiptDate(rfc3339: text)?.millisecondsSince1970 ?? .min }
}
