/// Where a receipt was issued, from the undocumented attribute 0.
public enum ReceiptEnvironment: String, Sendable, Hashable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
    case xcode = "Xcode"

    /// Maps the receipt-type strings Apple writes ("ProductionSandbox" among them) to an environment.
    public init?(receiptType: String) {
        switch receiptType {
        case "Production": self = .production
        case "ProductionSandbox", "Sandbox": self = .sandbox
        case "Xcode": self = .xcode
        default: return nil
        }
    }
}

/// The decoded payload of an App Store receipt (unified app receipt, iOS 7+ and macOS).
public struct Receipt: Sendable, Hashable {
    /// Attribute 0, verbatim: "Production", "ProductionSandbox", "Xcode", or nil when absent.
    public var receiptType: String?
    /// Attribute 1, the App Store's id of the app (Apple's `adam_id`); 0 outside production.
    public var appItemID: Int64?
    /// Attribute 2.
    public var bundleID: String
    /// Attribute 3: CFBundleVersion on iOS, CFBundleShortVersionString on macOS.
    public var applicationVersion: String
    /// Attribute 19.
    public var originalApplicationVersion: String?
    /// Attribute 12: when the App Store signed the receipt; the instant the chain is checked at.
    public var creationDate: ReceiptDate
    /// Attribute 21 (volume purchase and Xcode receipts).
    public var expirationDate: ReceiptDate?
    /// Attribute 18.
    public var originalPurchaseDate: ReceiptDate?
    /// Attribute 16 (Apple's `version_external_identifier`).
    public var versionExternalIdentifier: Int64?
    /// Attribute 15, undocumented (Apple's `download_id`); 0 or absent outside production.
    public var downloadID: Int64?
    /// Attribute 17, one entry per in-app purchase set, in the order the receipt holds them.
    public var inAppPurchases: [InAppPurchase]

    public init(
        receiptType: String? = nil, appItemID: Int64? = nil, bundleID: String, applicationVersion: String,
        originalApplicationVersion: String? = nil, creationDate: ReceiptDate, expirationDate: ReceiptDate? = nil,
        originalPurchaseDate: ReceiptDate? = nil, versionExternalIdentifier: Int64? = nil, downloadID: Int64? = nil,
        inAppPurchases: [InAppPurchase] = []
    ) {
        self.receiptType = receiptType
        self.appItemID = appItemID
        self.bundleID = bundleID
        self.applicationVersion = applicationVersion
        self.originalApplicationVersion = originalApplicationVersion
        self.creationDate = creationDate
        self.expirationDate = expirationDate
        self.originalPurchaseDate = originalPurchaseDate
        self.versionExternalIdentifier = versionExternalIdentifier
        self.downloadID = downloadID
        self.inAppPurchases = inAppPurchases
    }

    public var environment: ReceiptEnvironment? { receiptType.flatMap(ReceiptEnvironment.init(receiptType:)) }
}

/// One in-app purchase set (attribute 17), decoded from attribute types 17xx.
public struct InAppPurchase: Sendable, Hashable {
    public var quantity: Int64?                 // 1701
    public var productID: String?               // 1702
    public var transactionID: String?           // 1703
    public var purchaseDate: ReceiptDate?       // 1704
    public var originalTransactionID: String?   // 1705
    public var originalPurchaseDate: ReceiptDate?  // 1706
    public var expiresDate: ReceiptDate?        // 1708
    public var webOrderLineItemID: Int64?       // 1711
    public var cancellationDate: ReceiptDate?   // 1712
    public var isTrialPeriod: Bool              // 1713
    public var isInIntroOfferPeriod: Bool       // 1719
    public var promotionalOfferID: String?      // 1721

    public init(
        quantity: Int64? = nil, productID: String? = nil, transactionID: String? = nil,
        purchaseDate: ReceiptDate? = nil, originalTransactionID: String? = nil,
        originalPurchaseDate: ReceiptDate? = nil, expiresDate: ReceiptDate? = nil,
        webOrderLineItemID: Int64? = nil, cancellationDate: ReceiptDate? = nil, isTrialPeriod: Bool = false,
        isInIntroOfferPeriod: Bool = false, promotionalOfferID: String? = nil
    ) {
        self.quantity = quantity
        self.productID = productID
        self.transactionID = transactionID
        self.purchaseDate = purchaseDate
        self.originalTransactionID = originalTransactionID
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.webOrderLineItemID = webOrderLineItemID
        self.cancellationDate = cancellationDate
        self.isTrialPeriod = isTrialPeriod
        self.isInIntroOfferPeriod = isInIntroOfferPeriod
        self.promotionalOfferID = promotionalOfferID
    }
}

/// The state of one subscription as far as this receipt tells: its latest renewal.
public struct SubscriptionStatus: Sendable, Hashable {
    public var productID: String?
    public var originalTransactionID: String
    public var latestTransactionID: String?
    public var expiresDate: ReceiptDate
    /// Expires after the validation time, not cancelled and not upgraded.
    public var isActive: Bool
    public var isCancelled: Bool
    /// StoreKit 2's `isUpgraded`: the customer moved to a higher subscription of the group, which gives the service.
    public var isUpgraded = false

    public init(
        productID: String?, originalTransactionID: String, latestTransactionID: String?, expiresDate: ReceiptDate,
        isActive: Bool, isCancelled: Bool
    ) {
        self.productID = productID
        self.originalTransactionID = originalTransactionID
        self.latestTransactionID = latestTransactionID
        self.expiresDate = expiresDate
        self.isActive = isActive
        self.isCancelled = isCancelled
    }

    /// One entry per original transaction that has expiry dates, from the renewal that expires last; ordered by
    /// original transaction id so the output is stable.
    public static func summarize(_ purchases: [InAppPurchase], at now: ReceiptDate) -> [SubscriptionStatus] {
        // Sorting (key, position) pairs groups each subscription's renewals in key order, earliest first; it replaced
        // a dictionary of purchase copies that hashed every key and copied every purchase on each validation.
        var renewals: [(key: String, index: Int)] = []
        renewals.reserveCapacity(purchases.count)
        for (index, purchase) in purchases.enumerated() where purchase.expiresDate != nil {
            renewals.append((purchase.originalTransactionID ?? purchase.transactionID ?? "", index))
        }
        renewals.sort { $0.key < $1.key || ($0.key == $1.key && $0.index < $1.index) }
        var statuses: [SubscriptionStatus] = []
        var position = 0
        while position < renewals.count {
            let key = renewals[position].key
            // The renewal that expires last; of several that expire together, the first listed.
            var latest = renewals[position].index
            position += 1
            while position < renewals.count, renewals[position].key == key {
                if purchases[renewals[position].index].expiresDate! > purchases[latest].expiresDate! {
                    latest = renewals[position].index
                }
                position += 1
            }
            let purchase = purchases[latest]
            let expires = purchase.expiresDate!
            let cancelled = purchase.cancellationDate != nil
            statuses.append(SubscriptionStatus(
                productID: purchase.productID, originalTransactionID: key,
                latestTransactionID: purchase.transactionID, expiresDate: expires,
                isActive: expires > now && !cancelled, isCancelled: cancelled))
        }
        return statuses
    }
}
