public import AppStoreServerAPI
public import JSONText
public import ReceiptEngine
import StoreKitJWS

/// What Get App Transaction Info found for a transaction id.
public enum AppTransactionLookup: Sendable {
    /// The verified app transaction, rendered as every verified app transaction is (`app_transaction` of a result).
    case found(bundleID: String, environment: AppStoreEnvironment, JSONValue)
    /// Apple answered, but its signed app transaction failed verification: it is not believed, nor shown.
    case refused(ValidationError)
    /// Not found anywhere, no key, Apple unreachable or busy: as the other lookups.
    case unanswered(ServerAPILookup)
}

extension ReceiptRoutes {
    /// Get App Transaction Info in every app and environment with a key until one knows the transaction (any
    /// transaction id of the customer). `signedAppTransactionInfo` is verified as an app transaction like any other
    /// JWS: coming over TLS from Apple's host proves nothing about what it says.
    public func lookUpAppTransaction(_ transactionID: String) -> AppTransactionLookup {
        let targets = serverAPIClients.targets
        guard !targets.isEmpty else { return .unanswered(.notConfigured) }
        let deadline = wallClockSeconds() + configuration.serverAPI.requestDeadline
        var failures: [AppStoreServerAPIError] = []
        for target in targets {
            let signed: String
            do {
                signed = try serverAPIClients.client(bundleID: target.bundleID, environment: target.environment)
                    .bounded(until: deadline).appTransactionInfo(transactionID: transactionID)
            } catch where error.code == .notFound {
                continue
            } catch {
                var fields = [
                    ("app", target.bundleID), ("environment", target.environment.rawValue), ("code", error.code.rawValue),
                ]
                if let appleCode = error.appleErrorCode { fields.append(("apple_error_code", String(appleCode))) }
                log?.event("server api request failed", fields)
                failures.append(error)
                continue
            }
            let result = jwsVerifier.verify(signed, requiredKind: .appTransaction, at: clock())
            intake.metrics.recordVerdict(kind: result.kind, error: result.error)
            guard result.isValid, let appTransaction = result.appTransaction else {
                let error = result.error ?? ValidationError(.malformedJWS, "the signed app transaction has no payload")
                log?.event("server api app transaction refused", [("code", error.code.rawValue)])
                return .refused(error)
            }
            let rendered = JWSResultJSON.appTransaction(appTransaction)
            return .found(bundleID: target.bundleID, environment: target.environment, rendered)
        }
        if failures.isEmpty { return .unanswered(.notFound) }
        let busy = failures.filter { $0.code == .busy }
        guard busy.isEmpty else {
            return .unanswered(.busy(retryAfterSeconds: busy.compactMap(\.retryAfterSeconds).min(), failures))
        }
        return .unanswered(.unavailable(failures))
    }
}
