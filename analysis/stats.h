#pragma once
// Two-sample statistics for `pacer compare`: descriptive summaries, Welch's t-test, the
// Mann-Whitney U test, and the effect-size Z-scores the comparison report ranks by.
//
// Conventions (the report's legend repeats them):
// - Samples are one value per cycle (decode step). NaN values are dropped before any statistic.
// - Variances are sample variances (n-1 denominator).
// - p-values are two-sided. A test that cannot be computed (fewer than 2 values on a side) gives
//   NaN, which renderers show as "n/a"; it never silently becomes 0 or 1.
// - Zero variance on both sides: the t-test gives p = 1 when the means are equal and p = 0 when
//   they differ (a noise-free, deterministic difference). The U-test gives p = 1 when every value
//   is tied (nothing to rank).
#include <cstddef>
#include <span>
#include <vector>

namespace pacer::analysis::stats {

struct Summary {
  size_t n = 0;
  double mean = 0;
  double var = 0;  // sample variance (n-1); 0 when n < 2
  // Effective sample size for the mean (summarize_series): n for independent values, fewer when
  // neighbours are correlated. 0 means "not estimated": the tests then use n.
  double n_eff = 0;
  double r1 = 0;  // lag-1 autocorrelation the n_eff came from (0 when not estimated)
  double sd() const noexcept;
  double effective_n() const noexcept { return n_eff > 0 ? n_eff : static_cast<double>(n); }
};

// NaNs are skipped; an empty input gives n = 0, mean = NaN.
Summary summarize(std::span<const double> x) noexcept;

// Decode steps are a time series, not independent draws: a slow step tends to follow a slow step
// (the clock, the co-runners and the cache state drift slowly), with lag-1 autocorrelation of
// 0.3-0.8 in real logs. Treating such values as independent makes a test on equal runs reject
// far more often than its alpha. For an AR(1)-like series the variance of the mean is
// var/n x (1 + r1) / (1 - r1), so the effective sample size is
//   n_eff = n (1 - r1) / (1 + r1)   for r1 > 0 (n otherwise), clamped to [2, n].
// r1 is estimated from adjacent pairs of finite values (a NaN breaks the pair); fewer than 3
// values or zero variance give r1 = 0.
double lag1_autocorrelation(std::span<const double> x) noexcept;
double effective_sample_size(size_t n, double r1) noexcept;
// summarize() plus r1 and n_eff, for a series in time order (one value per decode step).
Summary summarize_series(std::span<const double> x) noexcept;

// Linear-interpolation quantile (numpy's default, Hyndman-Fan type 7) of the non-NaN values;
// q in [0,1]. NaN for an empty input.
double quantile(std::span<const double> x, double q);

struct WelchResult {
  double t = 0;   // (mean_b - mean_a) / se; +-inf when se == 0 and the means differ
  double df = 0;  // Welch-Satterthwaite degrees of freedom
  double p = 0;   // two-sided; NaN when either side has fewer than 2 values
};
// Welch's unequal-variance t-test of b against a (sign follows mean_b - mean_a). Uses each
// side's effective_n() for the standard error and the degrees of freedom.
WelchResult welch_t_test(const Summary& a, const Summary& b);
WelchResult welch_t_test(std::span<const double> a, std::span<const double> b);

struct MannWhitneyResult {
  double u = 0;        // U statistic of sample a (number of pairs with a > b, ties count 1/2)
  double z = 0;        // normal-approximation z with tie and continuity correction; 0 when exact
  double p = 0;        // two-sided; NaN when either side has fewer than 1 value
  bool exact = false;  // p from the exact permutation distribution (small samples, no ties)
};
// Two-sided Mann-Whitney U test. Exact when n_a + n_b <= kExactMaxTotal and there are no ties;
// otherwise the normal approximation with the tie-corrected variance
//   var(U) = n_a n_b / 12 * ((n + 1) - sum(t^3 - t) / (n (n - 1)))
// and a continuity correction of 0.5 (as scipy's method="asymptotic", use_continuity=True).
MannWhitneyResult mann_whitney_u(std::span<const double> a, std::span<const double> b);
inline constexpr size_t kExactMaxTotal = 20;
// The same test for two time series: U is unchanged, its variance is that of the AUC U/(na nb)
// with each side's effective sample size (lag-1 autocorrelation, see effective_sample_size),
//   var(AUC) = (na_eff + nb_eff + 1) / (12 na_eff nb_eff) x tie factor,
// and the p-value is never exact when either side is autocorrelated.
MannWhitneyResult mann_whitney_u_series(std::span<const double> a, std::span<const double> b);

// Effect size of a change: (mean_b - mean_a) / s, where s is the root mean square of the two
// standard deviations, sqrt((sd_a^2 + sd_b^2) / 2) (Cohen's d with equal weights, symmetric in
// the two runs), floored at `sd_floor`. The floor stands for measurement resolution: without it a
// noise-free counter would give an infinite Z for any change. Both means equal (including both
// zero-variance) gives 0.
double z_score(const Summary& a, const Summary& b, double sd_floor);

// The floor pacer uses for a metric on its natural scale: 1% of the larger |mean|, so a
// noise-free 1% change scores |Z| = 1. (Log-scale metrics use kLogSdFloor, ~1% relative.)
double relative_sd_floor(const Summary& a, const Summary& b);
inline constexpr double kRelativeSdFloor = 0.01;
inline constexpr double kLogSdFloor = 0.01;

// Offset for taking logs of a non-negative metric that may be 0 (run-queue delay, context
// switches): 1% of the median of the strictly positive values of both samples, or 1 when none is
// positive. Scale-free, unlike log1p (which depends on whether the unit is ns or ms).
double log_offset(std::span<const double> a, std::span<const double> b);
// ln(max(x, 0) + offset) for each x (NaN stays NaN). Negative values are clamped to 0: pacer's
// metrics are counts, times and rates, never negative except by a broken source.
std::vector<double> log_transform(std::span<const double> x, double offset);

// Logarithmic mean L(a, b) = (a - b) / (ln a - ln b), L(a, a) = a; both > 0. The weight that
// makes a log-change decomposition (LMDI) add up exactly: a - b = L(a,b) * ln(a/b).
double log_mean(double a, double b);

}  // namespace pacer::analysis::stats
