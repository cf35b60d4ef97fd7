//! Numbers written into a protocol's text (lengths, ids, windows) without the formatting
//! machinery, on the hot path of every family whose protocol spells numbers out.

/// Appends `n` in decimal.
pub fn push_number(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_are_written_in_decimal_from_zero_to_the_largest() {
        let mut out = Vec::new();
        for n in [0, 7, 10, 907, u64::MAX] {
            super::push_number(&mut out, n);
            out.push(b' ');
        }
        assert_eq!(out, b"0 7 10 907 18446744073709551615 ");
    }
}
