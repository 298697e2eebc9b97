dnl libcurl: the webhook sender (required).
AC_DEFUN([DT_CHECK_CURL], [DT_CHECK_LIB([curl], [libcurl], [curl/curl.h], [curl], [curl_easy_init], [yes],
  [libcurl prefix (required)])])
