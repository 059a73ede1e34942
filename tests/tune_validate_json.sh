#!/usr/bin/env bash
# tune_validate_json.sh HSR_RUN HSR: a short `hsr tune --validate --compute wait
# --json` on 4 ranks as 2 simulated nodes. stdout is one JSON document of the
# documented schema (docs/tuning.md): every layout has its role, predicted
# and measured step, communication, exposed, compute and busy times, all
# finite, and errors for step and communication; the fit says compute holds
# no core (steal 0) and gives its residuals; the recommendation names a
# validated layout. No timing is asserted.
set -u
run=$1 hsr=$2
tmp=$(mktemp -d /tmp/hsr-tune-json.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "tune_validate_json: $*"; exit 1; }
"$run" --launcher mpirun -n 4 --nodes 2 -- "$hsr" tune --validate --compute wait --json --units 4 --unit-size 256K \
  --compute-ms-per-unit 2 --validate-steps 1 --validate-top 1 --validate-bad 1 --validate-keep "$tmp/v" \
  >"$tmp/out.json" 2>"$tmp/err.txt" || { cat "$tmp/err.txt"; fail "hsr tune --validate failed"; }
jq -e . "$tmp/out.json" >/dev/null || { head -c 600 "$tmp/out.json"; fail "stdout is not one JSON document"; }
check() { # jq filter that must be true, and what it means
  jq -e "$1" "$tmp/out.json" >/dev/null || fail "$2 (jq: $1)"
}
fin='(type == "number") and (isinfinite | not) and (isnan | not)'
check '.tool == "hsr tune --validate" and .compute_mode == "wait" and .ranks == 4 and .nodes == 2' "the header fields"
check '(.layouts | length) >= 3' "at least the top layout, the bad one and a probe"
check '[.layouts[].role] | (index("top") != null) and (index("bad") != null) and (index("probe") != null)' \
  "layouts of every role"
for side in predicted measured; do
  for k in step_ms comm_ms exposed_ms compute_ms; do
    check "all(.layouts[]; .$side.$k | $fin)" "every layout's $side $k is a finite number"
  done
  check "all(.layouts[]; .$side.busy_ms | (.shard | $fin) and (.replicate | $fin) and (.partial | $fin))" \
    "every layout's $side busy time per group"
done
check "all(.layouts[]; .predicted.step_pm_ms | $fin and . >= 0)" "every prediction carries its +- (finite, >= 0)"
check "all(.layouts[]; .error_pct.step_ms | $fin) and all(.layouts[]; .error_pct.comm_ms | $fin)" "errors per layout"
check "all(.layouts[]; .measured.step_ms > 0 and .predicted.step_ms > 0)" "steps above zero"
check "(.errors.all.layouts == 2) and (.errors.all.step.mean_abs_pct | $fin) and (.errors.all.comm.worst_pct | $fin)" \
  "mean and worst errors over the 2 validated layouts"
check ".fit.cost_model.compute_off_host == true and all(.fit.cost_model.compute_steal[]; . == 0)" \
  "device-like compute: the fit takes nothing from compute"
check ".fit.cost_model.residual_rms | (.step | $fin) and (.compute | $fin)" "the fit's residuals"
check '.recommended as $r | [.layouts[] | select(.role == "top") | .label] | index($r) != null' \
  "the recommendation is the validated top layout"
check ".recommended_vs_fastest_pct | $fin and . >= 0" "recommended against the fastest measured"
check '(.predicted_ranking | length) > 0' "the predicted ranking"
[ -f "$tmp/v/validate.json" ] || fail "no validate.json in --validate-keep's directory"
echo "tune_validate_json: $(jq '.layouts | length' "$tmp/out.json") layouts, schema and finite figures as documented"
