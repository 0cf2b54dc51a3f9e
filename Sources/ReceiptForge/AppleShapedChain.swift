#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
internal import CryptoFloor

/// A root, an intermediate and a leaf issued as Apple's are: the WWDR marker on the intermediate, the signing marker
/// on the leaf (either can be left out, to test the refusal). Both test PKIs, RSA for receipts and EC for StoreKit 2,
/// are made by it.
struct AppleShapedChain {
    var names: (root: String, intermediate: String, leaf: String)
    /// Each certificate's validity; nil takes `validity`.
    var validity: ClosedRange<Date>
    var intermediateValidity: ClosedRange<Date>?
    var leafValidity: ClosedRange<Date>?
    var rootMarkers: [String] = []
    var intermediateHasMarker = true
    var leafHasMarker = true

    func issue(
        rootKey: PrivateKey, intermediateKey: PrivateKey, leafKey: PrivateKey
    ) throws -> (root: X509Certificate, intermediate: X509Certificate, leaf: X509Certificate) {
        func seconds(_ range: ClosedRange<Date>?) -> (Int64, Int64) {
            let range = range ?? validity
            return (Int64(range.lowerBound.timeIntervalSince1970), Int64(range.upperBound.timeIntervalSince1970))
        }
        let serial = Int64.random(in: 1...(1 << 40))
        let (rootFrom, rootUntil) = seconds(nil)
        let root = try CertificateIssuer.issue(
            CertificateTemplate(
                commonName: names.root, serial: serial, notBefore: rootFrom, notAfter: rootUntil, isCA: true,
                markers: rootMarkers),
            subjectKey: rootKey, issuer: nil, issuerKey: rootKey)
        let (intermediateFrom, intermediateUntil) = seconds(intermediateValidity)
        let intermediate = try CertificateIssuer.issue(
            CertificateTemplate(
                commonName: names.intermediate, serial: serial + 1, notBefore: intermediateFrom,
                notAfter: intermediateUntil, isCA: true,
                markers: intermediateHasMarker ? [AppleMarker.worldwideDeveloperRelations] : []),
            subjectKey: intermediateKey, issuer: root, issuerKey: rootKey)
        let (leafFrom, leafUntil) = seconds(leafValidity)
        let leaf = try CertificateIssuer.issue(
            CertificateTemplate(
                commonName: names.leaf, serial: serial + 2, notBefore: leafFrom, notAfter: leafUntil, isCA: false,
                markers: leafHasMarker ? [AppleMarker.signing] : []),
            subjectKey: leafKey, issuer: intermediate, issuerKey: intermediateKey)
        return (root, intermediate, leaf)
    }
}
