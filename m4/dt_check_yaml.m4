dnl libyaml: the config and DeepSpeed JSON loader (required).
AC_DEFUN([DT_CHECK_YAML], [DT_CHECK_LIB([yaml], [yaml-0.1], [yaml.h], [yaml], [yaml_parser_initialize], [yes],
  [libyaml prefix (required)])])
