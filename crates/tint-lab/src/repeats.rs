//! Settings named twice: a seed, a method or a variant listed twice in one run would be computed
//! twice and reported as two rows of one thing, so every experiment refuses it, naming the value.

/// The first value of `values` that an earlier one repeats.
pub fn first_repeat<T: PartialEq>(values: &[T]) -> Option<&T> {
    values
        .iter()
        .enumerate()
        .find(|(i, v)| values[..*i].contains(v))
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_repeated_value_is_found() {
        assert_eq!(first_repeat(&[1, 2, 3]), None);
        assert_eq!(first_repeat::<u8>(&[]), None);
        assert_eq!(first_repeat(&[1, 2, 3, 2, 1]), Some(&2));
        assert_eq!(first_repeat(&["a", "a"]), Some(&"a"));
    }
}
