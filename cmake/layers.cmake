# layers.cmake — the library's layers, as README.md's layer table lists
# them (bottom to top): the rows of the table under "## Layers" whose first
# cell is `src/<name>/`.

# Sets out_var to the layers' names in the table's order; fails when a
# folder of src/ is missing from the table or the table names none.
function(stoke_read_layers readme out_var)
  file(STRINGS ${readme} lines)
  set(in_table OFF)
  set(layers)
  foreach(line IN LISTS lines)
    if(line MATCHES "^## ")
      if(line STREQUAL "## Layers")
        set(in_table ON)
      else()
        set(in_table OFF)
      endif()
    elseif(in_table AND line MATCHES "^\\| `src/([a-z_]+)/` \\|")
      list(APPEND layers ${CMAKE_MATCH_1})
    endif()
  endforeach()
  if(NOT layers)
    message(FATAL_ERROR "${readme}: no layer table (## Layers)")
  endif()
  file(GLOB folders LIST_DIRECTORIES true RELATIVE ${PROJECT_SOURCE_DIR}/src
       ${PROJECT_SOURCE_DIR}/src/*)
  foreach(f ${folders})
    if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/src/${f})
      list(FIND layers ${f} i)
      if(i EQUAL -1)
        message(FATAL_ERROR "src/${f}/ is not in README.md's layer table")
      endif()
    endif()
  endforeach()
  set(${out_var} ${layers} PARENT_SCOPE)
endfunction()

# Makes ${CMAKE_BINARY_DIR}/layers/<layer>/ hold a link to each folder of
# src/ that layer may include (itself and those below it, in `allowed`),
# so that "storage/blob.h" resolves there and "tune/tune.h" does not; sets
# out_var to that folder.
function(stoke_layer_include_dir layer allowed out_var)
  set(dir ${CMAKE_BINARY_DIR}/layers/${layer})
  file(MAKE_DIRECTORY ${dir})
  # Links left by an older order go (file(REMOVE) removes a link, never
  # what it points to).
  file(GLOB old LIST_DIRECTORIES true RELATIVE ${dir} ${dir}/*)
  foreach(o ${old})
    list(FIND allowed ${o} i)
    if(i EQUAL -1)
      file(REMOVE ${dir}/${o})
    endif()
  endforeach()
  foreach(a ${allowed})
    if(NOT IS_SYMLINK ${dir}/${a})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${a} ${dir}/${a} SYMBOLIC)
    endif()
  endforeach()
  set(${out_var} ${dir} PARENT_SCOPE)
endfunction()
