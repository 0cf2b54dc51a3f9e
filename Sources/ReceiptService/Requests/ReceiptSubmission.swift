internal import HTTP1Server
import JSONText
import ReceiptEngine
import StoreKitJWS
internal import CryptoFloor

/// A request that cannot be answered with a verdict: the status, a stable code and a message for the client.
/// The signed data and device id a `POST /v1/validate` carries, whichever of the accepted forms it came in.
struct ReceiptSubmission: Sendable, Hashable {
    /// What was signed: a classic receipt or a StoreKit 2 compact JWS, told apart by their look.
    enum SignedData: Sendable, Hashable {
        /// DER (or BER) bytes.
        case receipt([UInt8])
        /// The JWS text as received; the verifier trims surrounding whitespace.
        case jws([UInt8])
    }

    var signedData: SignedData
    /// From the body (JSON member or form field), when it had one; the query and header are fallbacks.
    var deviceID: String?

    /// Reads the body by `Content-Type`, parameters ignored. No `Content-Type` reads as raw bytes (RFC 9110 §8.3 lets
    /// a recipient assume `application/octet-stream`).
    init(request: HTTPRequest) throws(RequestProblem) {
        let header = request.headers["Content-Type"]
        let mediaType = header.flatMap(MediaType.init)
        if let header, mediaType == nil {
            throw RequestProblem(
                status: 415, code: .unsupportedMediaType, message: "Content-Type \"\(header)\" is not a media type",
                detail: .notAMediaType)
        }
        switch mediaType?.essence {
        case nil, "application/octet-stream", "application/pkcs7-mime", "application/x-pkcs7-mime":
            try self.init(rawOrBase64: request.body[...])
        case "text/plain":
            try self.init(text: request.body[...], deviceID: nil)
        case "application/json":
            try self.init(json: request.body)
        case "multipart/form-data":
            guard let boundary = mediaType?.parameter("boundary") else {
                throw .badRequest(.missingBoundary, "multipart/form-data without a boundary parameter")
            }
            try self.init(multipart: request.body, boundary: boundary)
        case let other?:
            throw RequestProblem(
                status: 415, code: .unsupportedMediaType,
                message: "\(other) is not accepted; send application/octet-stream, text/plain (base64), "
                    + "application/json or multipart/form-data")
        }
    }

    init(signedData: SignedData, deviceID: String?) {
        self.signedData = signedData
        self.deviceID = deviceID
    }

    /// A JWS, or a receipt's base64 (as copied from a log: whitespace and newlines are ignored).
    private init(text: ArraySlice<UInt8>, deviceID: String?) throws(RequestProblem) {
        if JWSVerifier.looksLikeJWS(text) {
            self.init(signedData: .jws(Array(text)), deviceID: deviceID)
        } else {
            self.init(signedData: .receipt(try Self.decodeBase64(text)), deviceID: deviceID)
        }
    }

    /// Raw DER, or text sent with a binary type (a common client mistake that costs nothing to forgive).
    private init(rawOrBase64 bytes: ArraySlice<UInt8>, deviceID: String? = nil) throws(RequestProblem) {
        // Each test once: a JWS body is scanned by one and copied once, never scanned again.
        if JWSVerifier.looksLikeJWS(bytes) {
            self.init(signedData: .jws(Array(bytes)), deviceID: deviceID)
        } else if Base64.looksLikeText(bytes) {
            self.init(signedData: .receipt(try Self.decodeBase64(bytes)), deviceID: deviceID)
        } else {
            guard bytes.contains(where: { !Base64.isTextWhitespace($0) }) else {
                throw .badRequest(.missingReceipt, "missing receipt: the body is empty")
            }
            self.init(signedData: .receipt(Array(bytes)), deviceID: deviceID)
        }
    }

    private init(json body: [UInt8]) throws(RequestProblem) {
        let json: JSONValue
        do {
            json = try JSONValue(parsing: body)
        } catch {
            throw .badRequest(.bodyNotJSON, "body is not valid JSON: \(error)")
        }
        guard case .object = json else {
            throw .badRequest(
                .notAJSONObject, "expected a JSON object with a \"receipt\", \"jws\" or \"signedPayload\" member")
        }
        // `signedPayload` is Apple's notification body as staff copy it from a log; `jws` any StoreKit 2 JWS.
        let key = ["receipt", "jws", "signedPayload"].first { json[$0] != nil && json[$0] != .null }
        guard let key, let value = json[key] else {
            throw .badRequest(
                .missingReceipt,
                "missing receipt: expected a \"receipt\" member holding base64 (or \"jws\" or \"signedPayload\" "
                    + "holding a StoreKit 2 JWS)")
        }
        guard case .string(let text) = value else {
            throw .badRequest(
                .memberNotAString, key == "receipt" ? "\"receipt\" must be a base64 string" : "\"\(key)\" must be a string")
        }
        let deviceID: String?
        switch json["device_id"] {
        case nil, .null?: deviceID = nil
        case .string(let text)?: deviceID = text
        default: throw .badRequest(.memberNotAString, "\"device_id\" must be a string")
        }
        if key != "receipt" {
            guard JWSVerifier.looksLikeJWS(text) else {
                throw .badRequest(.notACompactJWS, "\"\(key)\" is not a compact JWS (three base64url segments separated by dots)")
            }
            self.init(signedData: .jws(Array(text.utf8)), deviceID: deviceID)
        } else {
            try self.init(text: Array(text.utf8)[...], deviceID: deviceID)
        }
    }

    private init(multipart body: [UInt8], boundary: String) throws(RequestProblem) {
        let form: MultipartFormData
        do {
            form = try MultipartFormData(body: body, boundary: boundary)
        } catch {
            throw .badRequest(error.detail, error.description)
        }
        guard let receiptPart = form.part(named: "receipt") else {
            throw .badRequest(.missingReceipt, "missing receipt: expected a form part named \"receipt\"")
        }
        let deviceID = form.part(named: "device_id").map { String(decoding: $0.content, as: UTF8.self) }
        try self.init(rawOrBase64: receiptPart.content, deviceID: deviceID)
    }

    private static func decodeBase64(_ bytes: ArraySlice<UInt8>) throws(RequestProblem) -> [UInt8] {
        // PEM's dashes and words are base64url and whitespace, and some PEM even decodes: say what it is, whatever
        // the Content-Type, rather than "not valid base64" or a damaged receipt.
        if MalformedInput.isPEM(bytes), let diagnosis = MalformedInput.diagnosis(of: Array(bytes)) {
            var problem = RequestProblem.badRequest(.notBase64, diagnosis.message)
            problem.reason = diagnosis.reason?.rawValue
            throw problem
        }
        guard let decoded = Base64.decodeText(bytes) else {
            var problem = RequestProblem.badRequest(.notBase64, "receipt is not valid base64")
            if let diagnosis = MalformedInput.diagnosis(of: Array(bytes)), let reason = diagnosis.reason {
                problem.message += ": " + diagnosis.message
                problem.reason = reason.rawValue
            }
            throw problem
        }
        guard !decoded.isEmpty else { throw .badRequest(.missingReceipt, "missing receipt: the base64 text is empty") }
        return decoded
    }
}
