# SQLite and fmt, as the project's libraries link them: `rankscope_sqlite` and `rankscope_fmt`.
# They give every program the system's shared libraries, except a target whose
# RANKSCOPE_SELF_CONTAINED property is ON (the injected collector: collector/README.md,
# "Dropping into any process"): that one gets the static libsqlite3.a and only fmt's headers
# (it compiles fmt's out-of-line part itself, collector/fmt_definitions.cc). In a usage
# requirement, $<TARGET_PROPERTY:prop> reads the target being linked, so trace/ and base/
# compile once and each program picks at its own link.

get_filename_component(rankscope_sqlite_dir "${SQLite3_LIBRARY}" DIRECTORY)
find_library(RANKSCOPE_SQLITE3_STATIC_LIBRARY NAMES libsqlite3.a HINTS "${rankscope_sqlite_dir}")
if(NOT RANKSCOPE_SQLITE3_STATIC_LIBRARY)
  message(FATAL_ERROR "libsqlite3.a not found beside ${SQLite3_LIBRARY}: the injected collector links SQLite "
                      "statically; install libsqlite3-dev (scripts/install-deps.sh) or set "
                      "RANKSCOPE_SQLITE3_STATIC_LIBRARY")
endif()
add_library(rankscope_sqlite_static STATIC IMPORTED)
set_target_properties(rankscope_sqlite_static PROPERTIES
  IMPORTED_LOCATION "${RANKSCOPE_SQLITE3_STATIC_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${SQLite3_INCLUDE_DIRS}"
  INTERFACE_LINK_LIBRARIES "m;${CMAKE_DL_LIBS};Threads::Threads")

# fmt::fmt's compile requirements without its library.
add_library(rankscope_fmt_headers INTERFACE)
target_include_directories(rankscope_fmt_headers SYSTEM INTERFACE
  $<TARGET_PROPERTY:fmt::fmt,INTERFACE_INCLUDE_DIRECTORIES>)
target_compile_definitions(rankscope_fmt_headers INTERFACE
  $<TARGET_PROPERTY:fmt::fmt,INTERFACE_COMPILE_DEFINITIONS>)

set(rankscope_self_contained "$<BOOL:$<TARGET_PROPERTY:RANKSCOPE_SELF_CONTAINED>>")
add_library(rankscope_sqlite INTERFACE)
target_link_libraries(rankscope_sqlite INTERFACE
  $<IF:${rankscope_self_contained},rankscope_sqlite_static,SQLite::SQLite3>)
add_library(rankscope_fmt INTERFACE)
target_link_libraries(rankscope_fmt INTERFACE $<IF:${rankscope_self_contained},rankscope_fmt_headers,fmt::fmt>)
