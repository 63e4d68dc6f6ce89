// libcurl for the etcd client, loaded when the first client is made rather than linked: a daemon
// that serves one host never maps libcurl and what it pulls in (OpenSSL, GnuTLS, Kerberos, LDAP,
// SSH: about 5.5 MiB of resident pages in every process that links it). The header is Debian's
// libcurl4-openssl-dev's; the library is its run-time package's libcurl.so.4.
//
// libcurl's option setters are C variadic functions, which Swift cannot call, so each argument
// type gets a typed wrapper; every other function used has a wrapper of the same shape.
#ifndef OBS_CCURL_H
#define OBS_CCURL_H

#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

/// Loads libcurl and runs its global set-up, once per process (later calls return the first
/// call's result). NULL when it is ready; otherwise why not, in words. No other function here
/// may be called before a call returned NULL.
const char *obs_curl_load(void);

CURL *obs_curl_easy_init(void);
void obs_curl_easy_cleanup(CURL *handle);
CURLcode obs_curl_easy_pause(CURL *handle, int bitmask);
const char *obs_curl_easy_strerror(CURLcode code);

CURLcode obs_curl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode obs_curl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode obs_curl_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode obs_curl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value);
CURLcode obs_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
CURLcode obs_curl_setopt_write_function(CURL *handle, curl_write_callback callback);
CURLcode obs_curl_setopt_header_function(CURL *handle, curl_write_callback callback);
/// Whether the loaded libcurl speaks HTTP/2 (built with nghttp2), which the gRPC API needs.
int obs_curl_has_http2(void);
CURLcode obs_curl_setopt_sockopt_function(CURL *handle, curl_sockopt_callback callback);
CURLcode obs_curl_setopt_closesocket_function(CURL *handle, curl_closesocket_callback callback);
CURLcode obs_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode obs_curl_getinfo_offset(CURL *handle, CURLINFO info, curl_off_t *value);
CURLcode obs_curl_getinfo_socket(CURL *handle, CURLINFO info, curl_socket_t *value);

CURLM *obs_curl_multi_init(void);
CURLMcode obs_curl_multi_cleanup(CURLM *multi);
CURLMcode obs_curl_multi_add_handle(CURLM *multi, CURL *handle);
CURLMcode obs_curl_multi_remove_handle(CURLM *multi, CURL *handle);
CURLMsg *obs_curl_multi_info_read(CURLM *multi, int *queued);
CURLMcode obs_curl_multi_socket_action(CURLM *multi, curl_socket_t socket, int mask, int *running);
CURLMcode obs_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
CURLMcode obs_curl_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value);
CURLMcode obs_curl_multi_setopt_socket_function(CURLM *multi, curl_socket_callback callback);
CURLMcode obs_curl_multi_setopt_timer_function(CURLM *multi, curl_multi_timer_callback callback);

struct curl_slist *obs_curl_slist_append(struct curl_slist *list, const char *string);
void obs_curl_slist_free_all(struct curl_slist *list);

#endif
