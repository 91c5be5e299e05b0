// analysis/stats against values worked out by hand (derivations in the comments). The p-values
// that need a distribution's tail were cross-checked with mpmath at 30 digits:
//   t-test:  p = betainc(df/2, 1/2, 0, df/(df+t^2), regularized=True)
//   U-test:  p = erfc(z/sqrt(2))
#include "analysis/stats.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace pacer::analysis::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(StatsSummary, MeanAndSampleVariance) {
  // mean = 40/8 = 5; squared deviations 9,1,1,1,0,0,4,16 sum to 32; var = 32/7.
  const std::vector<double> x = {2, 4, 4, 4, 5, 5, 7, 9};
  const Summary s = summarize(x);
  EXPECT_EQ(s.n, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_DOUBLE_EQ(s.var, 32.0 / 7.0);
  EXPECT_DOUBLE_EQ(s.sd(), std::sqrt(32.0 / 7.0));
}

TEST(StatsSummary, SkipsNaNAndHandlesTinySamples) {
  const std::vector<double> x = {kNaN, 3.0, kNaN};
  const Summary s = summarize(x);
  EXPECT_EQ(s.n, 1u);
  EXPECT_DOUBLE_EQ(s.mean, 3.0);
  EXPECT_DOUBLE_EQ(s.var, 0.0);
  EXPECT_TRUE(std::isnan(summarize(std::vector<double>{}).mean));
}

TEST(StatsSummary, LargeNearlyEqualValuesKeepPrecision) {
  // 1e9 + {1,2,3}: var = 1 exactly; a naive sum-of-squares formula loses it entirely.
  const std::vector<double> x = {1e9 + 1, 1e9 + 2, 1e9 + 3};
  EXPECT_DOUBLE_EQ(summarize(x).var, 1.0);
}

TEST(StatsQuantile, LinearInterpolationType7) {
  // Sorted {1,2,3,4}: position q*(n-1). q=.5 -> 1.5 -> 2.5; q=.9 -> 2.7 -> 3.7; q=.99 -> 3.97.
  const std::vector<double> x = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(quantile(x, 0.5), 2.5);
  EXPECT_NEAR(quantile(x, 0.9), 3.7, 1e-12);
  EXPECT_NEAR(quantile(x, 0.99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(quantile(x, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile(x, 1.0), 4.0);
  EXPECT_TRUE(std::isnan(quantile(std::vector<double>{}, 0.5)));
}

TEST(StatsWelch, MatchesHandComputation) {
  // a = 1..5: mean 3, var 2.5; b = 2,4,..,10: mean 6, var 10.
  // va = 2.5/5 = 0.5, vb = 10/5 = 2; t = 3/sqrt(2.5) = 1.8973665961;
  // df = 2.5^2 / (0.5^2/4 + 2^2/4) = 6.25/1.0625 = 5.8823529412; p = 0.1075311949306.
  const std::vector<double> a = {1, 2, 3, 4, 5};
  const std::vector<double> b = {2, 4, 6, 8, 10};
  const WelchResult r = welch_t_test(a, b);
  EXPECT_NEAR(r.t, 1.8973665961010276, 1e-12);
  EXPECT_NEAR(r.df, 5.882352941176471, 1e-12);
  EXPECT_NEAR(r.p, 0.10753119493062724, 1e-9);
  // Swapping the samples flips the sign only.
  const WelchResult s = welch_t_test(b, a);
  EXPECT_NEAR(s.t, -r.t, 1e-12);
  EXPECT_NEAR(s.p, r.p, 1e-12);
}

TEST(StatsWelch, ZeroVarianceIsDeterministic) {
  const std::vector<double> a = {3000, 3000, 3000};
  const std::vector<double> b = {2100, 2100, 2100, 2100};
  const WelchResult differ = welch_t_test(a, b);
  EXPECT_EQ(differ.p, 0.0);
  EXPECT_TRUE(std::isinf(differ.t) && differ.t < 0);
  const WelchResult same = welch_t_test(a, a);
  EXPECT_EQ(same.p, 1.0);
  EXPECT_EQ(same.t, 0.0);
}

TEST(StatsWelch, OneSidedZeroVarianceUsesOtherSideDf) {
  // a constant, b = {1,2,3} (var 1): se^2 = 1/3, t = (2 - 0)/sqrt(1/3) = 2*sqrt(3);
  // the a-term drops out of Welch-Satterthwaite: df = (1/3)^2 / ((1/3)^2/2) = 2 = nb - 1.
  const std::vector<double> a = {0, 0, 0, 0};
  const std::vector<double> b = {1, 2, 3};
  const WelchResult r = welch_t_test(a, b);
  EXPECT_NEAR(r.t, 2 * std::sqrt(3.0), 1e-12);
  EXPECT_NEAR(r.df, 2.0, 1e-12);
  // t with 2 df has a closed form: p = 1 - t/sqrt(t^2 + 2) = 1 - sqrt(12)/sqrt(14).
  EXPECT_NEAR(r.p, 1 - std::sqrt(12.0 / 14.0), 1e-12);
}

TEST(StatsWelch, TooFewValuesIsNaN) {
  const std::vector<double> a = {1.0};
  const std::vector<double> b = {1, 2, 3};
  EXPECT_TRUE(std::isnan(welch_t_test(a, b).p));
}

TEST(StatsMannWhitney, TiesUseMidranksAndCorrectedVariance) {
  // Pooled sorted: 1a 2a 2a 2b 3a 3b 4b 5b 5b. Midranks: 1; (2,3,4)->3; (5,6)->5.5; 7; (8,9)->8.5.
  // R_a = 1 + 3 + 3 + 5.5 = 12.5; U_a = 12.5 - 4*5/2 = 2.5 (pairwise: 0 + 0.5+0.5 + 1.5).
  // Tie groups t = 3, 2, 2: sum(t^3 - t) = 24 + 6 + 6 = 36.
  // var(U) = 4*5/12 * (10 - 36/(9*8)) = 15.8333; z = (|2.5 - 10| - 0.5)/sqrt(15.8333) = 1.7591864
  // p = erfc(z/sqrt 2) = 0.07854585095119.
  const std::vector<double> a = {1, 2, 2, 3};
  const std::vector<double> b = {2, 3, 4, 5, 5};
  const MannWhitneyResult r = mann_whitney_u(a, b);
  EXPECT_FALSE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 2.5);
  EXPECT_NEAR(r.z, -1.7591864148251211, 1e-12);
  EXPECT_NEAR(r.p, 0.07854585095119067, 1e-12);
}

TEST(StatsMannWhitney, ExactForSmallSamplesWithoutTies) {
  // a = {1,3,5}, b = {2,4,6,8}: U_a = #(a > b) = 0 + 1 + 2 = 3. Of the C(7,3) = 35 orderings,
  // those with U <= 3 are the partitions of 0..3 into at most 3 parts <= 4: 1+1+2+3 = 7.
  // Two-sided p = 2 * 7/35 = 0.4.
  const std::vector<double> a = {1, 3, 5};
  const std::vector<double> b = {2, 4, 6, 8};
  const MannWhitneyResult r = mann_whitney_u(a, b);
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 3.0);
  EXPECT_NEAR(r.p, 0.4, 1e-12);
  // Complete separation, 3 vs 3: only 1 of C(6,3) = 20 orderings has U = 0: p = 2/20.
  const std::vector<double> lo = {1, 2, 3}, hi = {4, 5, 6};
  EXPECT_NEAR(mann_whitney_u(lo, hi).p, 0.1, 1e-12);
}

TEST(StatsMannWhitney, AllTiedGivesPOne) {
  const std::vector<double> a(15, 7.0), b(12, 7.0);
  const MannWhitneyResult r = mann_whitney_u(a, b);
  EXPECT_DOUBLE_EQ(r.u, 15 * 12 / 2.0);
  EXPECT_EQ(r.p, 1.0);
}

TEST(StatsMannWhitney, LargeSeparatedSamplesAreSignificant) {
  // 30 vs 30 fully separated, no ties: U = 0, mean 450, var = 900*61/12 = 4575;
  // z = -(450 - 0.5)/sqrt(4575) = -6.6455...; p ~ 3.0e-11.
  std::vector<double> a, b;
  for (int i = 0; i < 30; ++i) {
    a.push_back(i);
    b.push_back(100 + i);
  }
  const MannWhitneyResult r = mann_whitney_u(a, b);
  EXPECT_FALSE(r.exact);
  EXPECT_NEAR(r.z, -449.5 / std::sqrt(4575.0), 1e-12);
  EXPECT_LT(r.p, 1e-10);
}

TEST(StatsZScore, PooledSdAndFloor) {
  // a = {10,12,14}: mean 12, var 4; b = {15,17,19}: mean 17, var 4.
  // s = sqrt((4+4)/2) = 2; Z = 5/2 = 2.5 (the 1% floor, 0.17, does not bind).
  const std::vector<double> a = {10, 12, 14}, b = {15, 17, 19};
  const Summary sa = summarize(a), sb = summarize(b);
  EXPECT_DOUBLE_EQ(z_score(sa, sb, relative_sd_floor(sa, sb)), 2.5);
  EXPECT_DOUBLE_EQ(z_score(sb, sa, relative_sd_floor(sa, sb)), -2.5);
}

TEST(StatsZScore, ZeroVarianceUsesResolutionFloor) {
  // Noise-free 3000 -> 2100 MHz: floor = 1% of 3000 = 30; Z = -900/30 = -30 (not infinite,
  // and not 0 as a "divide by the normal run's sd, 0 when sd is 0" rule would give).
  const std::vector<double> a = {3000, 3000}, b = {2100, 2100};
  const Summary sa = summarize(a), sb = summarize(b);
  EXPECT_DOUBLE_EQ(z_score(sa, sb, relative_sd_floor(sa, sb)), -30.0);
  EXPECT_EQ(z_score(sa, sa, relative_sd_floor(sa, sa)), 0.0);
  const std::vector<double> zeros = {0, 0};
  const Summary z = summarize(zeros);
  EXPECT_EQ(z_score(z, z, relative_sd_floor(z, z)), 0.0);
}

TEST(StatsLog, OffsetIsScaleFree) {
  // Positive values {10, 20, 30}: median 20, offset 0.2. In ns instead of us: 200 (x1000).
  const std::vector<double> a = {0, 10, 20}, b = {0, 30};
  EXPECT_DOUBLE_EQ(log_offset(a, b), 0.2);
  const std::vector<double> a_ns = {0, 10000, 20000}, b_ns = {0, 30000};
  EXPECT_DOUBLE_EQ(log_offset(a_ns, b_ns), 200.0);
  const std::vector<double> none = {0, 0};
  EXPECT_DOUBLE_EQ(log_offset(none, none), 1.0);
  const std::vector<double> x = {0, 9.8, -1, kNaN};
  const std::vector<double> lx = log_transform(x, 0.2);
  EXPECT_DOUBLE_EQ(lx[0], std::log(0.2));
  EXPECT_DOUBLE_EQ(lx[1], std::log(10.0));
  EXPECT_DOUBLE_EQ(lx[2], std::log(0.2));  // clamped
  EXPECT_TRUE(std::isnan(lx[3]));
}

TEST(StatsLog, LogarithmicMean) {
  // L(e^2, e) = (e^2 - e) / (2 - 1); L(a, a) = a; a - b = L(a, b) ln(a/b) exactly.
  const double e = std::exp(1.0);
  EXPECT_NEAR(log_mean(e * e, e), e * e - e, 1e-12);
  EXPECT_DOUBLE_EQ(log_mean(5.0, 5.0), 5.0);
  EXPECT_NEAR(log_mean(3.0, 7.0) * std::log(3.0 / 7.0), 3.0 - 7.0, 1e-12);
}

TEST(StatsSeries, Lag1AutocorrelationByHand) {
  // 1..5: mean 3, deviations -2,-1,0,1,2; sum of squares 10; adjacent products 2+0+0+2 = 4.
  const std::vector<double> x = {1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(lag1_autocorrelation(x), 0.4);
  // Alternating: deviations +-1, products all -1 (3 of them), sum of squares 4 -> -0.75.
  const std::vector<double> alt = {1, -1, 1, -1};
  EXPECT_DOUBLE_EQ(lag1_autocorrelation(alt), -0.75);
  // A NaN breaks the pair it sits in: 1,2,NaN,4,5 has mean 3, products (-2)(-1) + (1)(2) = 4,
  // squares 4+1+1+4 = 10.
  const std::vector<double> gap = {1, 2, kNaN, 4, 5};
  EXPECT_DOUBLE_EQ(lag1_autocorrelation(gap), 0.4);
  const std::vector<double> flat = {2, 2, 2, 2};
  EXPECT_DOUBLE_EQ(lag1_autocorrelation(flat), 0.0);
}

TEST(StatsSeries, EffectiveSampleSize) {
  EXPECT_DOUBLE_EQ(effective_sample_size(100, 0.6), 100 * 0.4 / 1.6);  // 25
  EXPECT_DOUBLE_EQ(effective_sample_size(100, 0.0), 100.0);
  EXPECT_DOUBLE_EQ(effective_sample_size(100, -0.5), 100.0);  // never more than n
  EXPECT_DOUBLE_EQ(effective_sample_size(10, 0.95), 2.0);     // floored: still testable
  const std::vector<double> x = {1, 2, 3, 4, 5};
  const Summary s = summarize_series(x);
  EXPECT_DOUBLE_EQ(s.r1, 0.4);
  EXPECT_DOUBLE_EQ(s.n_eff, 5 * 0.6 / 1.4);
  EXPECT_DOUBLE_EQ(s.effective_n(), s.n_eff);
  EXPECT_DOUBLE_EQ(summarize(x).effective_n(), 5.0);
}

TEST(StatsSeries, WelchOnEffectiveSizeEqualsWelchOnThatMany) {
  // 100 values worth 25 must give the same t, df and p as 25 independent values.
  Summary a{100, 0.0, 1.0, 25.0, 0.6}, b{100, 0.5, 1.0, 25.0, 0.6};
  Summary a25{25, 0.0, 1.0}, b25{25, 0.5, 1.0};
  const WelchResult r = welch_t_test(a, b), r25 = welch_t_test(a25, b25);
  EXPECT_DOUBLE_EQ(r.t, r25.t);
  EXPECT_DOUBLE_EQ(r.df, r25.df);
  EXPECT_DOUBLE_EQ(r.p, r25.p);
  // t = 0.5 / sqrt(2/25); df = (2/25)^2 / (2 (1/25)^2 / 24) = 48.
  EXPECT_NEAR(r.t, 0.5 / std::sqrt(2.0 / 25), 1e-12);
  EXPECT_NEAR(r.df, 48.0, 1e-9);
}

TEST(StatsSeries, UTestOnIndependentSeriesMatchesClassicalApproximation) {
  // Anti-correlated (r1 < 0) series keep n: same U and p as the classical test when that is not
  // exact (n > kExactMaxTotal).
  std::vector<double> a, b;
  for (int i = 0; i < 15; ++i) {
    a.push_back(i % 2 ? 10.0 + i : 30.0 - i);
    b.push_back(i % 2 ? 12.5 + i : 31.5 - i);
  }
  ASSERT_LT(lag1_autocorrelation(a), 0);
  ASSERT_LT(lag1_autocorrelation(b), 0);
  const MannWhitneyResult c = mann_whitney_u(a, b), s = mann_whitney_u_series(a, b);
  EXPECT_DOUBLE_EQ(s.u, c.u);
  EXPECT_DOUBLE_EQ(s.p, c.p);
}

// The defect this guards against: decode steps with lag-1 autocorrelation 0.6 made the "Welch or
// U at 5%" gate fire on about a third of equal-run pairs. AR(1) series, x_t = 0.6 x_{t-1} + e_t,
// 64 steps a run, 400 equal pairs from a fixed seed.
struct GateRates {
  double classical = 0, series = 0;
};
GateRates equal_run_rejection_rates(double phi, double shift) {
  std::mt19937_64 rng(20261124);
  std::normal_distribution<double> noise(0.0, 1.0);
  auto series = [&](double mean) {
    std::vector<double> x(64);
    double v = noise(rng) / std::sqrt(1 - phi * phi);  // stationary start
    for (double& xi : x) {
      v = phi * v + noise(rng);
      xi = 10.0 + mean + v;
    }
    return x;
  };
  int classical = 0, adjusted = 0;
  constexpr int kPairs = 400;
  for (int i = 0; i < kPairs; ++i) {
    const std::vector<double> a = series(0), b = series(shift);
    const bool c = welch_t_test(a, b).p < 0.05 || mann_whitney_u(a, b).p < 0.05;
    const bool s = welch_t_test(summarize_series(a), summarize_series(b)).p < 0.05 ||
                   mann_whitney_u_series(a, b).p < 0.05;
    classical += c;
    adjusted += s;
  }
  return {classical / double(kPairs), adjusted / double(kPairs)};
}

TEST(StatsSeries, EqualAutocorrelatedRunsRejectAtAboutAlpha) {
  const GateRates r = equal_run_rejection_rates(0.6, 0.0);
  EXPECT_GT(r.classical, 0.2);  // the old gate: far above 5%
  EXPECT_LT(r.series, 0.10);    // two tests OR-ed at 5% each: a little above 5% is expected
}

TEST(StatsSeries, RealShiftsAreStillFound) {
  // A shift of 2 innovation sds (1.6 marginal sds) in 64 steps at phi 0.6 is found nearly always.
  const GateRates r = equal_run_rejection_rates(0.6, 2.0);
  EXPECT_GT(r.series, 0.9);
}

}  // namespace
}  // namespace pacer::analysis::stats
