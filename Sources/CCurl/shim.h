#ifndef RECEIPTD_CCURL_SHIM_H
#define RECEIPTD_CCURL_SHIM_H

#include <curl/curl.h>

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call; one typed wrapper per argument kind.

typedef size_t (*receiptd_curl_data_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode receiptd_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode receiptd_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode receiptd_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode receiptd_curl_setopt_callback(CURL *handle, CURLoption option, receiptd_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode receiptd_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode receiptd_curl_global_init(void) { return curl_global_init(CURL_GLOBAL_DEFAULT); }

// HTTPS only, redirects included. CURLOPT_PROTOCOLS_STR replaced the bitmask in 7.85 (Debian 12 has 7.88, Ubuntu
// 22.04 7.81), and the old one is deprecated since: pick by the headers' version.
static inline CURLcode receiptd_curl_https_only(CURL *handle) {
#if LIBCURL_VERSION_NUM >= 0x075500
    return curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "https");
#else
    return curl_easy_setopt(handle, CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTPS);
#endif
}

static inline CURLcode receiptd_curl_http_or_https(CURL *handle) {
#if LIBCURL_VERSION_NUM >= 0x075500
    return curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    return curl_easy_setopt(handle, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
}

#endif
