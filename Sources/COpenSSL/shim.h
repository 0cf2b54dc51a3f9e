#ifndef RECEIPTD_COPENSSL_SHIM_H
#define RECEIPTD_COPENSSL_SHIM_H

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

// Function-like macros and stack helpers do not import into Swift; these wrappers expose them.

static inline int receiptd_sk_X509_num(const STACK_OF(X509) *stack) { return sk_X509_num(stack); }
static inline X509 *receiptd_sk_X509_value(const STACK_OF(X509) *stack, int index) { return sk_X509_value(stack, index); }
static inline STACK_OF(X509) *receiptd_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int receiptd_sk_X509_push(STACK_OF(X509) *stack, X509 *cert) { return sk_X509_push(stack, cert); }
static inline void receiptd_sk_X509_free(STACK_OF(X509) *stack) { sk_X509_free(stack); }
static inline void receiptd_OPENSSL_free(void *pointer) { OPENSSL_free(pointer); }
static inline long receiptd_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

// EVP_RSA_gen is a variadic macro in OpenSSL 3.
static inline EVP_PKEY *receiptd_rsa_generate(unsigned int bits) { return EVP_RSA_gen(bits); }
// EVP_EC_gen is a macro in OpenSSL 3 as well; `curve` is a group name such as "P-256".
static inline EVP_PKEY *receiptd_ec_generate(const char *curve) { return EVP_EC_gen(curve); }

#endif
