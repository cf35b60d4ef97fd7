//! Statistics over repetitions: mean, sample standard deviation, a 95% confidence interval of
//! the mean from Student's t distribution, and Welch's t-test for two means.

use serde::Serialize;

/// Two-sided 95% critical values of Student's t (the 0.975 quantile) for 1..=30 degrees of
/// freedom; beyond that see [`t_975`].
const T_975: [f64; 30] = [
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010,
    2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687,
    2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
];

/// The 0.975 quantile of Student's t with `df` degrees of freedom. A fractional df (Welch)
/// is rounded down, which widens the interval: the conservative side.
pub fn t_975(df: f64) -> f64 {
    if df.is_nan() || df < 1.0 {
        return f64::NAN;
    }
    let d = df.floor() as usize;
    match d {
        1..=30 => T_975[d - 1],
        31..=39 => 2.0423,
        40..=59 => 2.0211,
        60..=119 => 2.0003,
        120..=999 => 1.9799,
        _ => 1.9600,
    }
}

/// Summary of one number over the repetitions of a cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); None for a single value.
    pub stdev: Option<f64>,
    pub min: f64,
    pub max: f64,
    /// 95% confidence interval of the mean (Student's t); None for a single value.
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
}

impl Stats {
    /// Statistics of the values; None when there are none.
    pub fn of(values: &[f64]) -> Option<Stats> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (stdev, ci95_low, ci95_high) = if n >= 2 {
            let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let sd = variance.sqrt();
            let half = t_975((n - 1) as f64) * sd / (n as f64).sqrt();
            (Some(sd), Some(mean - half), Some(mean + half))
        } else {
            (None, None, None)
        };
        Some(Stats {
            n,
            mean,
            stdev,
            min,
            max,
            ci95_low,
            ci95_high,
        })
    }

    /// Half the width of the confidence interval, when there is one.
    pub fn ci95_half(&self) -> Option<f64> {
        Some((self.ci95_high? - self.ci95_low?) / 2.0)
    }
}

/// Welch's t-test: whether two means differ beyond the noise at the 95% level (two-sided).
/// None when either side has fewer than two values or both have no spread.
pub fn welch_differs(a: &Stats, b: &Stats) -> Option<bool> {
    let (sa, sb) = (a.stdev?, b.stdev?);
    let (va, vb) = (sa * sa / a.n as f64, sb * sb / b.n as f64);
    let se2 = va + vb;
    if se2 <= 0.0 {
        return Some(a.mean != b.mean);
    }
    let t = (a.mean - b.mean).abs() / se2.sqrt();
    // Welch–Satterthwaite degrees of freedom.
    let df = se2 * se2 / (va * va / (a.n as f64 - 1.0) + vb * vb / (b.n as f64 - 1.0));
    Some(t > t_975(df))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_stdev_and_interval() {
        let s = Stats::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.mean, 5.0);
        // Sample variance 32/7.
        assert!((s.stdev.unwrap() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        let half = 2.3646 * (32.0f64 / 7.0).sqrt() / 8f64.sqrt();
        assert!((s.ci95_low.unwrap() - (5.0 - half)).abs() < 1e-9);
        assert_eq!((s.min, s.max), (2.0, 9.0));
        let one = Stats::of(&[3.0]).unwrap();
        assert_eq!((one.stdev, one.ci95_low), (None, None));
        assert!(Stats::of(&[]).is_none());
    }

    #[test]
    fn welch_tells_noise_from_difference() {
        let a = Stats::of(&[100.0, 101.0, 99.0, 100.5, 99.5]).unwrap();
        let b = Stats::of(&[100.2, 100.8, 99.4, 100.1, 99.9]).unwrap();
        let c = Stats::of(&[110.0, 111.0, 109.0, 110.5, 109.5]).unwrap();
        assert_eq!(welch_differs(&a, &b), Some(false));
        assert_eq!(welch_differs(&a, &c), Some(true));
        assert_eq!(welch_differs(&a, &Stats::of(&[1.0]).unwrap()), None);
    }

    #[test]
    fn t_values_shrink_towards_the_normal() {
        assert_eq!(t_975(1.0), 12.7062);
        assert_eq!(t_975(4.7), 2.7764, "fractional df rounds down");
        assert!(t_975(10_000.0) > 1.95 && t_975(10_000.0) < 1.97);
    }
}
