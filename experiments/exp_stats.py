"""Statistics for the experiments/exp_*.sh tables, with the standard library only (Debian's python3, no SciPy)."""
import math
import statistics


def t_cdf(t, nu):
    """Student's t distribution function for integer nu (Abramowitz & Stegun 26.7.3-4)."""
    th = math.atan(t / math.sqrt(nu))
    s, c = math.sin(th), math.cos(th)
    if nu % 2:
        series = term = c if nu > 1 else 0.0
        for k in range(3, nu - 1, 2):
            term *= (k - 1) / k * c * c
            series += term
        a = 2 / math.pi * (th + s * series)
    else:
        series = term = 1.0
        for k in range(2, nu - 1, 2):
            term *= (k - 1) / k * c * c
            series += term
        a = s * series
    return (1 + a) / 2


def paired_t(differences):
    """(t, degrees of freedom, two-sided p) of a one-sample t-test of paired differences against 0."""
    n = len(differences)
    sd = statistics.stdev(differences) if n > 1 else 0.0
    if sd == 0:
        return float("nan"), n - 1, float("nan")
    t = statistics.mean(differences) / (sd / math.sqrt(n))
    return t, n - 1, 2 * min(t_cdf(t, n - 1), 1 - t_cdf(t, n - 1))


def mean_sd(xs, digits=4):
    """'mean ± sample sd' (just the value for one; "n/a" when a value is missing, NaN)."""
    if any(math.isnan(x) for x in xs):
        return "n/a"
    if len(xs) == 1:
        return f"{xs[0]:+.{digits}f}"
    return f"{statistics.mean(xs):+.{digits}f} ± {statistics.stdev(xs):.{digits}f}"
