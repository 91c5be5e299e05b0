#include "analysis/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>

namespace pacer::analysis::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> finite_values(std::span<const double> x) {
  std::vector<double> out;
  out.reserve(x.size());
  for (double v : x)
    if (!std::isnan(v)) out.push_back(v);
  return out;
}

// Two-sided normal tail probability of |z|.
double normal_two_sided(double z) {
  static const boost::math::normal_distribution<double> kStdNormal(0.0, 1.0);
  if (!std::isfinite(z)) return 0.0;
  return std::min(1.0, 2.0 * boost::math::cdf(boost::math::complement(kStdNormal, std::fabs(z))));
}

// Exact two-sided p of the U statistic for sizes (m, n) without ties. counts[u] is the number of
// the C(m+n, m) orderings whose U equals u, built with the recurrence on the largest element:
// f(m, n, u) = f(m-1, n, u-n) [largest is from a: it beats all n of b] + f(m, n-1, u).
double exact_u_p(size_t m, size_t n, double u) {
  const size_t max_u = m * n;
  // table[i][j] = distribution for sizes (i, j), built row by row over i.
  std::vector<std::vector<std::vector<double>>> f(m + 1, std::vector<std::vector<double>>(n + 1));
  for (size_t i = 0; i <= m; ++i) {
    for (size_t j = 0; j <= n; ++j) {
      auto& cur = f[i][j];
      cur.assign(i * j + 1, 0.0);
      if (i == 0 || j == 0) {
        cur[0] = 1.0;
        continue;
      }
      const auto& from_a = f[i - 1][j];  // largest element from a adds j
      const auto& from_b = f[i][j - 1];
      for (size_t k = 0; k < from_a.size(); ++k) cur[k + j] += from_a[k];
      for (size_t k = 0; k < from_b.size(); ++k) cur[k] += from_b[k];
    }
  }
  const auto& dist = f[m][n];
  const double total = std::accumulate(dist.begin(), dist.end(), 0.0);
  const auto u_int = static_cast<size_t>(std::llround(u));
  double le = 0, ge = 0;
  for (size_t k = 0; k <= max_u; ++k) {
    if (k <= u_int) le += dist[k];
    if (k >= u_int) ge += dist[k];
  }
  return std::min(1.0, 2.0 * std::min(le, ge) / total);
}

}  // namespace

double Summary::sd() const noexcept {
  return std::sqrt(var);
}

Summary summarize(std::span<const double> x) noexcept {
  Summary s;
  double sum = 0;
  for (double v : x) {
    if (std::isnan(v)) continue;
    ++s.n;
    sum += v;
  }
  if (s.n == 0) {
    s.mean = kNaN;
    return s;
  }
  s.mean = sum / static_cast<double>(s.n);
  if (s.n < 2) return s;
  // Two-pass: the centred sum of squares does not lose precision on large, nearly equal values
  // (timestamps, MHz) the way sum(x^2) - n mean^2 would.
  double ss = 0;
  for (double v : x)
    if (!std::isnan(v)) ss += (v - s.mean) * (v - s.mean);
  s.var = ss / static_cast<double>(s.n - 1);
  return s;
}

double quantile(std::span<const double> x, double q) {
  std::vector<double> v = finite_values(x);
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  q = std::clamp(q, 0.0, 1.0);
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return v[lo] + frac * (v[hi] - v[lo]);
}

double lag1_autocorrelation(std::span<const double> x) noexcept {
  const Summary s = summarize(x);
  if (s.n < 3 || !(s.var > 0)) return 0;
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) continue;
    const double d = x[i] - s.mean;
    den += d * d;
    if (i + 1 < x.size() && !std::isnan(x[i + 1])) num += d * (x[i + 1] - s.mean);
  }
  return den > 0 ? std::clamp(num / den, -1.0, 1.0) : 0.0;
}

double effective_sample_size(size_t n, double r1) noexcept {
  const auto dn = static_cast<double>(n);
  if (n < 2 || !(r1 > 0)) return dn;
  // r1 -> 1 would give n_eff -> 0: keep two values' worth so a test can still be computed.
  return std::clamp(dn * (1 - r1) / (1 + r1), 2.0, dn);
}

Summary summarize_series(std::span<const double> x) noexcept {
  Summary s = summarize(x);
  s.r1 = lag1_autocorrelation(x);
  s.n_eff = effective_sample_size(s.n, s.r1);
  return s;
}

WelchResult welch_t_test(const Summary& a, const Summary& b) {
  WelchResult r;
  if (a.n < 2 || b.n < 2) {
    r.t = kNaN;
    r.df = kNaN;
    r.p = kNaN;
    return r;
  }
  const double na = a.effective_n(), nb = b.effective_n();
  const double va = a.var / na;
  const double vb = b.var / nb;
  const double se2 = va + vb;
  const double diff = b.mean - a.mean;
  if (se2 <= 0) {
    // Both samples constant: the difference is either exactly zero or deterministic.
    r.df = static_cast<double>(a.n + b.n - 2);
    if (diff == 0) {
      r.t = 0;
      r.p = 1;
    } else {
      r.t = diff > 0 ? std::numeric_limits<double>::infinity()
                     : -std::numeric_limits<double>::infinity();
      r.p = 0;
    }
    return r;
  }
  r.t = diff / std::sqrt(se2);
  // Welch-Satterthwaite: df = (va + vb)^2 / (va^2/(na-1) + vb^2/(nb-1)); a zero term drops out.
  const double den = va * va / std::max(na - 1, 1.0) + vb * vb / std::max(nb - 1, 1.0);
  r.df = se2 * se2 / den;
  const boost::math::students_t_distribution<double> dist(r.df);
  r.p = std::min(1.0, 2.0 * boost::math::cdf(boost::math::complement(dist, std::fabs(r.t))));
  return r;
}

WelchResult welch_t_test(std::span<const double> a, std::span<const double> b) {
  return welch_t_test(summarize(a), summarize(b));
}

namespace {
// n_eff_a / n_eff_b: 0 = independent values (the classical test, exact when small).
MannWhitneyResult mann_whitney_impl(std::span<const double> a_in, std::span<const double> b_in,
                                    double n_eff_a, double n_eff_b) {
  MannWhitneyResult r;
  const std::vector<double> a = finite_values(a_in);
  const std::vector<double> b = finite_values(b_in);
  if (a.empty() || b.empty()) {
    r.u = kNaN;
    r.z = kNaN;
    r.p = kNaN;
    return r;
  }
  const size_t na = a.size(), nb = b.size(), n = na + nb;
  // Pool, sort, and give tied values their average (mid) rank.
  std::vector<std::pair<double, bool>> pooled;  // (value, from a)
  pooled.reserve(n);
  for (double v : a) pooled.emplace_back(v, true);
  for (double v : b) pooled.emplace_back(v, false);
  std::sort(pooled.begin(), pooled.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  double rank_sum_a = 0;
  double tie_term = 0;  // sum over tie groups of t^3 - t
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && pooled[j].first == pooled[i].first) ++j;
    const double t = static_cast<double>(j - i);
    const double mid_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (size_t k = i; k < j; ++k)
      if (pooled[k].second) rank_sum_a += mid_rank;
    tie_term += t * t * t - t;
    i = j;
  }
  const double dna = static_cast<double>(na), dnb = static_cast<double>(nb);
  const double dn = static_cast<double>(n);
  r.u = rank_sum_a - dna * (dna + 1) / 2.0;
  const double mean_u = dna * dnb / 2.0;
  const bool correlated = (n_eff_a > 0 && n_eff_a < dna) || (n_eff_b > 0 && n_eff_b < dnb);
  if (tie_term == 0 && n <= kExactMaxTotal && !correlated) {
    r.exact = true;
    r.z = 0;
    r.p = exact_u_p(na, nb, r.u);
    return r;
  }
  double var_u = dna * dnb / 12.0 * ((dn + 1) - tie_term / (dn * (dn - 1)));
  if (correlated) {
    // var(U) = (na nb)^2 var(AUC), with var(AUC) from the effective sizes; the tie factor
    // ((n + 1) - T / (n (n - 1))) / (n + 1) carries over unchanged.
    const double ea = n_eff_a > 0 ? std::min(n_eff_a, dna) : dna;
    const double eb = n_eff_b > 0 ? std::min(n_eff_b, dnb) : dnb;
    const double tie_factor = ((dn + 1) - tie_term / (dn * (dn - 1))) / (dn + 1);
    var_u = dna * dna * dnb * dnb * (ea + eb + 1) / (12.0 * ea * eb) * tie_factor;
  }
  if (var_u <= 0) {
    // Every value tied: no ordering evidence at all.
    r.z = 0;
    r.p = 1;
    return r;
  }
  const double dev = std::max(0.0, std::fabs(r.u - mean_u) - 0.5);
  r.z = (r.u >= mean_u ? 1.0 : -1.0) * dev / std::sqrt(var_u);
  r.p = normal_two_sided(r.z);
  return r;
}
}  // namespace

MannWhitneyResult mann_whitney_u(std::span<const double> a, std::span<const double> b) {
  return mann_whitney_impl(a, b, 0, 0);
}

MannWhitneyResult mann_whitney_u_series(std::span<const double> a, std::span<const double> b) {
  const Summary sa = summarize_series(a), sb = summarize_series(b);
  return mann_whitney_impl(a, b, sa.n_eff, sb.n_eff);
}

double z_score(const Summary& a, const Summary& b, double sd_floor) {
  if (a.n == 0 || b.n == 0) return kNaN;
  const double diff = b.mean - a.mean;
  if (diff == 0) return 0;
  const double s = std::max(std::sqrt((a.var + b.var) / 2.0), sd_floor);
  if (!(s > 0))
    return diff > 0 ? std::numeric_limits<double>::infinity()
                    : -std::numeric_limits<double>::infinity();
  return diff / s;
}

double relative_sd_floor(const Summary& a, const Summary& b) {
  return kRelativeSdFloor * std::max(std::fabs(a.mean), std::fabs(b.mean));
}

double log_offset(std::span<const double> a, std::span<const double> b) {
  std::vector<double> positive;
  for (auto span : {a, b})
    for (double v : span)
      if (v > 0) positive.push_back(v);
  if (positive.empty()) return 1.0;
  return 0.01 * quantile(positive, 0.5);
}

std::vector<double> log_transform(std::span<const double> x, double offset) {
  std::vector<double> out;
  out.reserve(x.size());
  for (double v : x) out.push_back(std::isnan(v) ? kNaN : std::log(std::max(v, 0.0) + offset));
  return out;
}

double log_mean(double a, double b) {
  if (a == b) return a;
  return (a - b) / (std::log(a) - std::log(b));
}

}  // namespace pacer::analysis::stats
