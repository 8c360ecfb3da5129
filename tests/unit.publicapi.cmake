# launchers/dask.c is written on the public API alone: only <lazycluster.h>, no lc__ symbol
# (tests/publicapi/check.sh compiles it with nothing but include/ on its include path).
add_test(NAME dask_public_api
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/publicapi/check.sh ${PROJECT_SOURCE_DIR}/include
    ${PROJECT_SOURCE_DIR}/launchers/dask.c)
set_tests_properties(dask_public_api PROPERTIES LABELS unit TIMEOUT 60
  ENVIRONMENT "CC=${CMAKE_C_COMPILER}")
