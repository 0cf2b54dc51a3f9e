import HTTP1Server

/// A request the service refuses before any verdict: a status, a stable machine code, a sentence for people and,
/// for a malformed request, which part failed (`detail`). Tests and clients match `code` and `detail`, never the
/// message.
struct RequestProblem: Error, Sendable, Hashable {
    /// The `error.code` of every answer that is not a verdict (verdicts carry `ValidationError.Code`).
    enum Code: String, Sendable, Hashable, CaseIterable {
        case badRequest = "bad_request"
        case unsupportedMediaType = "unsupported_media_type"
        case unauthorized
        case forbidden
        case authNotConfigured = "auth_not_configured"
        case notFound = "not_found"
        case methodNotAllowed = "method_not_allowed"
        case requestTimeout = "request_timeout"
        case payloadTooLarge = "payload_too_large"
        case headerTooLarge = "header_too_large"
        case notImplemented = "not_implemented"
        case serviceUnavailable = "service_unavailable"
        case httpVersionNotSupported = "http_version_not_supported"
        /// A notification whose signature holds but that lacks the members the ledger keys it by.
        case malformedJWS = "malformed_jws"
        case notASubscription = "not_a_subscription"
        case alreadyClaimed = "already_claimed"
        case revoked
        case storeNotConfigured = "store_not_configured"
        case storeUnavailable = "store_unavailable"
        /// Every ledger connection, or the SQLite writer's queue, is taken right now: retry this request after
        /// `Retry-After`; the ledger is up (`/readyz` stays 200).
        case storeBusy = "store_busy"
        /// `/v1/orders`: Apple knows no such order.
        case orderNotFound = "order_not_found"
        case serverAPINotConfigured = "server_api_not_configured"
        case serverAPIUnavailable = "server_api_unavailable"
        /// `server_api.max_concurrent_requests` already wait on Apple, or Apple asked to wait longer than
        /// `server_api.request_deadline`: come back after `Retry-After`.
        case serverAPIBusy = "server_api_busy"
        /// `/v1/accounts/{account}`: the ledger holds no link, token or transfer of this account.
        case accountNotFound = "account_not_found"
        /// `PUT /v1/accounts/{account}/app_account_tokens/{uuid}`: another account registered this token.
        case tokenOwnedByAnotherAccount = "token_owned_by_another_account"
        /// `POST /v1/accounts/{account}/purchases`: another account owns a purchase in the body, and the app's
        /// `restore_behavior` keeps it there.
        case ownedByAnotherAccount = "owned_by_another_account"
        /// `POST /v1/subscriptions/{id}/extend`: Apple refused the extension; `apple_error_code` says why (its limits:
        /// active subscriptions only, twice in 365 days, the family organizer's, 1–90 days).
        case extensionRefused = "extension_refused"
    }

    /// Which part of a `bad_request` (or `unsupported_media_type`) request failed, or why an `unauthorized` or
    /// `auth_not_configured` one was refused.
    enum Detail: String, Sendable, Hashable, CaseIterable {
        /// `Content-Type` is not a media type at all.
        case notAMediaType = "not_a_media_type"
        /// `multipart/form-data` without its `boundary` parameter.
        case missingBoundary = "missing_boundary"
        /// A `boundary` parameter that is empty or longer than RFC 2046's 70 characters.
        case invalidBoundary = "invalid_boundary"
        /// No boundary line anywhere in the multipart body.
        case noBoundaryLine = "no_boundary_line"
        /// The multipart body, or a part of it, ends before its closing boundary.
        case multipartUnterminated = "multipart_unterminated"
        case tooManyParts = "too_many_parts"
        case partHeadersTooLarge = "part_headers_too_large"
        case partHeadersUnterminated = "part_headers_unterminated"
        case partHeaderWithoutColon = "part_header_without_colon"
        /// No receipt at all: an empty body, no `receipt` form part, no `receipt`/`jws`/`signedPayload` member.
        case missingReceipt = "missing_receipt"
        case bodyNotJSON = "body_not_json"
        /// JSON, but not an object.
        case notAJSONObject = "not_a_json_object"
        /// `receipt`, `jws`, `signedPayload` or `device_id` holds something other than a string.
        case memberNotAString = "member_not_a_string"
        /// `jws` or `signedPayload` does not have the look of a compact JWS.
        case notACompactJWS = "not_a_compact_jws"
        /// The receipt text is not base64 (`reason` says what it is instead, when it is recognizable).
        case notBase64 = "not_base64"
        /// A notification body without `signedPayload`.
        case missingSignedPayload = "missing_signed_payload"
        case invalidKind = "invalid_kind"
        case invalidDeviceID = "invalid_device_id"
        /// A path id or `/lookup?id=` that is empty, too long, not made of `0-9 A-Z a-z . _ -`, or `.` or `..`; or
        /// such a `transactionId` or `originalTransactionId` in a notification.
        case invalidID = "invalid_id"
        /// A claim without `account`, or one that cannot be stored (in a claim's body or an account route's path).
        case invalidAccount = "invalid_account"
        /// An app account token in a path that is not a UUID.
        case invalidAppAccountToken = "invalid_app_account_token"
        /// `?at=` that is not an RFC 3339 date.
        case invalidDate = "invalid_date"
        /// A notification whose `notificationUUID` is not an id (`PathID`).
        case invalidNotificationUUID = "invalid_notification_uuid"
        /// `unauthorized`: no token, or no Bearer or Basic credential in `Authorization`.
        case missingToken = "missing_token"
        /// `unauthorized`: a token that no entry of `api_tokens` knows.
        case unknownToken = "unknown_token"
        /// `auth_not_configured`: no `api_tokens`, and the server listens on a wildcard or outside address.
        case listenerNotLoopback = "listener_not_loopback"
        /// `auth_not_configured`: no `api_tokens`, and a proxy forwarded the request to a loopback listener.
        case forwardedByProxy = "forwarded_by_proxy"
        /// A JSON body's member is missing or wrong; `field` names it.
        case invalidField = "invalid_field"
    }

    var status: HTTPStatus
    var code: Code
    var message: String
    /// What the upload was instead of a receipt (`pem`, `text`, `json`…), as `receiptd verify` tells it.
    var reason: String? = nil
    var detail: Detail? = nil
    /// Apple's numeric `errorCode`, when the problem is an error Apple answered.
    var appleErrorCode: Int64? = nil
    /// Seconds after which trying again is expected to work: sent as `Retry-After`.
    var retryAfterSeconds: Int? = nil
    /// With `invalid_field`: the body's member, as the caller spelled it (`consumption_percentage`).
    var field: String? = nil

    static func badRequest(_ detail: Detail, _ message: String) -> RequestProblem {
        RequestProblem(status: 400, code: .badRequest, message: message, detail: detail)
    }

    /// 400 `bad_request`, `detail` `invalid_field`, `field` naming the member: how every JSON body's member that is
    /// missing or wrong is refused.
    static func invalidField(_ field: String, _ message: String) -> RequestProblem {
        RequestProblem(status: 400, code: .badRequest, message: message, detail: .invalidField, field: field)
    }

    static func notFound(_ message: String) -> RequestProblem {
        RequestProblem(status: .notFound, code: .notFound, message: message)
    }
}
