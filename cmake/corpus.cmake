# Script mode: concatenates the files listed in LIST (one path a line) into
# OUT, each preceded by a line naming it; the default text of
# `hsr train --model gpt`.
file(STRINGS ${LIST} files)
file(WRITE ${OUT}.tmp "")
foreach(f ${files})
  file(RELATIVE_PATH rel ${SRC} ${f})
  file(READ ${f} text)
  file(APPEND ${OUT}.tmp "==> ${rel} <==\n${text}\n")
endforeach()
file(RENAME ${OUT}.tmp ${OUT})
