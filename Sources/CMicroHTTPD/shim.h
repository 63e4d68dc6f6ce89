// libmicrohttpd (Debian's libmicrohttpd-dev), the HTTP server behind `obsctl web`.
// microhttpd.h expects these before it.
#include <stdarg.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <microhttpd.h>

// MHD_start_daemon, MHD_set_connection_option and MHD_get_connection_info take their options as C
// varargs, which Swift cannot pass: these fix the few that obsctl sets. `listen_fd` is bound and
// listening already (obsctl binds it, so that a port in use is reported with its reason); the
// server closes it when it stops. `timeout_seconds` is every connection's timeout until
// obs_mhd_set_timeout changes it. `notify` is told of each connection when it starts and when it
// has closed (both on the server's own thread, the one that accepts; the socket is still open
// during the second).
static inline struct MHD_Daemon *obs_mhd_start(unsigned int flags, int listen_fd,
                                               MHD_AccessHandlerCallback handler, void *context,
                                               MHD_RequestCompletedCallback completed,
                                               MHD_NotifyConnectionCallback notify,
                                               unsigned int connection_limit, unsigned int timeout_seconds) {
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, context,
                            MHD_OPTION_LISTEN_SOCKET, listen_fd,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, context,
                            MHD_OPTION_NOTIFY_CONNECTION, notify, context,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
                            MHD_OPTION_END);
}

// A connection's socket (-1 if libmicrohttpd gives none).
static inline int obs_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

// A connection's own inactivity timeout, in seconds (0: none), from now on. Called from the
// connection's own thread (the access handler), as libmicrohttpd allows.
static inline enum MHD_Result obs_mhd_set_timeout(struct MHD_Connection *connection, unsigned int seconds) {
    return MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}
