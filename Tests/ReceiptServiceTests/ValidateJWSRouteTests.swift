import Foundation
import HTTP1Server
import JSONText
import ReceiptEngine
import ReceiptForge
import StoreKitJWS
import TestSupport
import Testing

@testable import ReceiptService

/// The forms a client sends a StoreKit 2 JWS to `/v1/validate` in.
enum JWSUpload: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case text, json, raw, multipart

    var testDescription: String { rawValue }

    func request(_ jws: String, query: String = "", headers: [(HTTPHeaderName, String)] = []) -> HTTPRequest {
        let target = "/v1/validate" + query
        switch self {
        case .text: return post(target, contentType: "text/plain", text: jws, headers: headers)
        case .json: return post(target, contentType: "application/json", text: #"{"jws":"\#(jws)"}"#, headers: headers)
        case .raw: return post(target, contentType: nil, text: jws, headers: headers)
        case .multipart:
            let boundary = "----receiptd-jws"
            return post(
                target, contentType: "multipart/form-data; boundary=\(boundary)",
                body: multipartBody(boundary: boundary, parts: [("receipt", "signed.jws", Array(jws.utf8))]),
                headers: headers)
        }
    }
}

/// `/v1/validate` with StoreKit 2 JWS of every kind, through the router; no ledger here.
struct ValidateJWSRouteTests {
    static let kinds = SignedDataKind.jwsKinds.map(\.rawValue)

    /// Never trusted, valid around `fixedNow`, its root carrying both of Apple's markers.
    static let rogue: JWSTestAuthority = {
        var options = JWSTestAuthority.Options(now: fixedNow)
        options.rootHasMarkers = true
        return try! .generate(options)
    }()

    static func payload(_ kind: String) -> JSONValue {
        switch SignedDataKind(rawValue: kind)! {
        case .transaction: return SignedEvents.firstMonth.payload
        case .renewalInfo: return SignedEvents.renewal(signed: -10).payload
        case .appTransaction:
            var blueprint = AppTransactionBlueprint(bundleID: LedgerService.bundleID, receiptCreationDate: SignedEvents.at(-1))
            blueprint.appAppleID = LedgerService.appAppleID
            return blueprint.payload
        case .notification:
            var blueprint = NotificationBlueprint(
                type: "TEST", bundleID: LedgerService.bundleID, signedDate: SignedEvents.at(-1))
            blueprint.appAppleID = LedgerService.appAppleID
            return blueprint.payload
        case .receipt: preconditionFailure("a receipt is not a JWS")
        }
    }

    static func forged(_ kind: String, by authority: JWSTestAuthority = JWSPKI.atFixedNow) throws -> String {
        try authority.sign(payload(kind))
    }

    @Test(arguments: kinds, JWSUpload.allCases)
    func eachKind_inEachForm_is200ValidWithItsKind(_ kind: String, _ upload: JWSUpload) throws {
        let response = LedgerService.routes().handle(upload.request(try Self.forged(kind)), on: .main)
        #expect(response.status == 200)
        #expect(response.json?["valid"] == .bool(true))
        #expect(response.json?["kind"] == .string(kind))
        #expect(response.json?["checks"]?["signature"] == .string("passed"))
    }

    @Test func notification_asAppleBodyInJSON_is200() throws {
        let body = #"{"signedPayload":"\#(try SignedEvents.subscribed())"}"#
        let response = LedgerService.routes().handle(post("/v1/validate", contentType: "application/json", text: body), on: .main)
        #expect(response.status == 200)
        #expect(response.json?["kind"] == .string("notification"))
        #expect(response.json?["notification"]?["notification_type"] == .string("SUBSCRIBED"))
        #expect(response.json?["transaction"]?["transaction_id"] == .string("7000"))
    }

    @Test(arguments: kinds)
    func rogueChain_is422CertificateUntrustedWithReason(_ kind: String) throws {
        let response = LedgerService.routes().handle(JWSUpload.text.request(try Self.forged(kind, by: Self.rogue)), on: .main)
        #expect(response.status == 422)
        #expect(response.json?["valid"] == .bool(false))
        #expect(response.errorCode == "certificate_untrusted")
        #expect(response.json?["error"]?["reason"] == .string("no_trusted_root"))
    }

    /// Each kind asked for as every other kind, and as a receipt.
    @Test(arguments: kinds)
    func kindOtherThanRequired_is422KindMismatch(_ kind: String) throws {
        let jws = try Self.forged(kind)
        for required in Self.kinds + ["receipt"] where required != kind {
            let response = LedgerService.routes().handle(JWSUpload.text.request(jws, query: "?kind=\(required)"), on: .main)
            #expect(response.status == 422, "kind=\(required)")
            #expect(response.errorCode == "kind_mismatch", "kind=\(required)")
        }
        let matching = LedgerService.routes().handle(JWSUpload.text.request(jws, query: "?kind=\(kind)"), on: .main)
        #expect(matching.status == 200)
    }

    @Test(arguments: ["subscription", "Transaction", "jws"])
    func unknownRequiredKind_is400(_ kind: String) throws {
        let response = LedgerService.routes().handle(
            JWSUpload.text.request(try Self.forged("transaction"), query: "?kind=\(kind)"), on: .main)
        #expect(response.status == 400)
        #expect(response.errorCode == "bad_request")
    }

    /// Where a client names the device.
    enum DeviceChannel: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case query, header, json

        var testDescription: String { rawValue }

        func request(_ jws: String, device: String) -> HTTPRequest {
            switch self {
            case .query: JWSUpload.text.request(jws, query: "?device_id=\(device)")
            case .header: JWSUpload.text.request(jws, headers: [("X-Device-Id", device)])
            case .json:
                post("/v1/validate", contentType: "application/json", text: #"{"jws":"\#(jws)","device_id":"\#(device)"}"#)
            }
        }
    }

    static let device = "3B76A7BD-8F5B-46A4-BCB1-CCE8DBD1B3CD"

    @Test(arguments: DeviceChannel.allCases, [true, false])
    func appTransactionBoundToDevice_passesForItAndFailsForAnother(_ channel: DeviceChannel, _ sameDevice: Bool) throws {
        var blueprint = AppTransactionBlueprint(
            bundleID: LedgerService.bundleID, receiptCreationDate: SignedEvents.at(-1), receiptType: "Sandbox")
        blueprint.bind(to: try #require(DeviceIdentifier(Self.device)))
        let jws = try JWSPKI.atFixedNow.sign(blueprint.payload)
        let asked = sameDevice ? Self.device.lowercased() : "00000000-1111-2222-3333-444444444444"
        let response = LedgerService.routes().handle(channel.request(jws, device: asked), on: .main)
        #expect(response.status == (sameDevice ? 200 : 422))
        #expect(response.json?["checks"]?["device_hash"] == .string(sameDevice ? "passed" : "failed"))
        #expect(response.errorCode == (sameDevice ? nil : "device_hash_mismatch"))
    }
}
