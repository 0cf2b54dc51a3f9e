import JSONText
public import Ledger

extension SubscriptionFacts {
    /// These facts as they stood at `instant` (Unix milliseconds): the rules applied at that instant to everything
    /// the ledger holds now, so that what happened after it has not happened yet.
    ///
    /// - Transactions purchased after `instant` are left out.
    /// - A revocation dated after `instant` is ignored: a later refund has not yet ended anything.
    /// - `isUpgraded` counts only once the upgrade had happened: when a transaction of the same original purchased
    ///   after the upgraded one, at or before `instant`, exists; or, while the ledger holds no later transaction at
    ///   all, from the upgraded version's signing date (Apple had marked it by then; when is otherwise unknown).
    /// - Renewal info and notifications are used as stored.
    ///
    /// A transaction whose facts change has its stored payload changed the same way, so that every view of it (the
    /// normalized transaction, the subscription's status) agrees.
    public func asOf(_ instant: Int64) -> SubscriptionFacts {
        // Mostly nothing changes (an account is read as of now): then nothing is copied, not even each transaction
        // to look at it (hence by index).
        guard
            transactions.indices.contains(where: {
                (transactions[$0].purchaseDate ?? .min) > instant || (transactions[$0].revocationDate ?? .min) > instant
                    || transactions[$0].isUpgraded == true
            })
        else { return self }
        var changed = false
        var kept: [TransactionFacts] = []
        kept.reserveCapacity(transactions.count)
        for transaction in transactions {
            guard (transaction.purchaseDate ?? .min) <= instant else {
                changed = true
                continue
            }
            var transaction = transaction
            var payloadEdits: [String: JSONValue?] = [:]
            if let revocation = transaction.revocationDate, revocation > instant {
                transaction.revocationDate = nil
                transaction.revocationReason = nil
                for key in ["revocationDate", "revocationReason", "revocationType", "revocationPercentage"] {
                    payloadEdits[key] = .some(nil)
                }
            }
            if transaction.isUpgraded == true, !wasUpgraded(transaction, at: instant) {
                transaction.isUpgraded = false
                payloadEdits["isUpgraded"] = .some(.bool(false))
            }
            if !payloadEdits.isEmpty {
                transaction.payloadJSON = Self.editing(transaction.payloadJSON, payloadEdits)
                changed = true
            }
            kept.append(transaction)
        }
        guard changed else { return self }
        var facts = self
        facts.transactions = kept
        return facts
    }

    private func wasUpgraded(_ upgraded: TransactionFacts, at instant: Int64) -> Bool {
        let purchased = upgraded.purchaseDate ?? .min
        let later = transactions.filter { ($0.purchaseDate ?? .min) > purchased }
        if later.isEmpty { return upgraded.signedDate <= instant }
        return later.contains { ($0.purchaseDate ?? .min) <= instant }
    }

    /// The payload with members removed (`.some(nil)`) or set; members keep their order, new ones go last.
    private static func editing(_ payloadJSON: String, _ edits: [String: JSONValue?]) -> String {
        guard case .object(var members) = LedgerFacts.payload(payloadJSON) else { return payloadJSON }
        var pending = edits
        members = members.compactMap { member in
            guard let edit = pending.removeValue(forKey: member.key) else { return member }
            return edit.map { (member.key, $0) }
        }
        for (key, edit) in pending.sorted(by: { $0.key < $1.key }) {
            if let value = edit { members.append((key, value)) }
        }
        return String(decoding: JSONValue.object(members).serialized(), as: UTF8.self)
    }
}

extension AccountRecord {
    /// Which original transactions the account owned at `instant` (Unix milliseconds), and which it had transferred
    /// away by then, with when it last did: its links as the ledger holds them now, undone by its transfer records
    /// dated after `instant`, which had not happened yet.
    ///
    /// `owned` keeps the order of `links`; an original the account has transferred away since comes after them.
    func ownership(at instant: Int64) -> (owned: [String], transferredAway: [String: Int64]) {
        // Per original, the first transfer after the instant says who held it then: the account it left.
        var nextTransfer: [String: AccountTransfer] = [:]
        var lastTransferAway: [String: Int64] = [:]
        for transfer in transfers {
            let original = transfer.originalTransactionID
            if transfer.transferredAt > instant {
                if nextTransfer[original] == nil { nextTransfer[original] = transfer }
            } else if transfer.fromAccount == account {
                lastTransferAway[original] = max(lastTransferAway[original] ?? .min, transfer.transferredAt)
            }
        }
        let linked = links.map(\.originalTransactionID)
        let linkedNow = Set(linked)
        func ownedThen(_ original: String) -> Bool {
            nextTransfer[original].map { $0.fromAccount == account } ?? linkedNow.contains(original)
        }
        let transferredSince = nextTransfer.keys.filter { !linkedNow.contains($0) && ownedThen($0) }
            .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        return (linked.filter(ownedThen) + transferredSince, lastTransferAway.filter { !ownedThen($0.key) })
    }
}
