//! Minimal PNG rendering: heat maps of square matrices and line charts of curves (no plotting crate).

use crate::error::{CgtError, Result};

/// An RGB raster image.
#[derive(Clone, Debug, PartialEq)]
pub struct Raster {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Row-major RGB bytes.
    pub pixels: Vec<u8>,
}

impl Raster {
    /// A white image.
    pub fn new(width: usize, height: usize) -> Self {
        Self {
            width,
            height,
            pixels: vec![255; width * height * 3],
        }
    }

    /// Sets one pixel (ignored outside the image).
    pub fn set(&mut self, x: usize, y: usize, rgb: [u8; 3]) {
        if x < self.width && y < self.height {
            let at = (y * self.width + x) * 3;
            self.pixels[at..at + 3].copy_from_slice(&rgb);
        }
    }

    /// Encodes as PNG bytes.
    pub fn to_png(&self) -> Result<Vec<u8>> {
        let mut bytes = Vec::new();
        {
            let mut encoder = png::Encoder::new(&mut bytes, self.width as u32, self.height as u32);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            let mut writer = encoder
                .write_header()
                .map_err(|e| CgtError::Png(e.to_string()))?;
            writer
                .write_image_data(&self.pixels)
                .map_err(|e| CgtError::Png(e.to_string()))?;
        }
        Ok(bytes)
    }
}

/// Diverging colour map: -1 blue, 0 white, +1 red (values clamped).
pub fn diverging(value: f32) -> [u8; 3] {
    let v = value.clamp(-1.0, 1.0);
    let fade = |t: f32| (255.0 * (1.0 - t)).round() as u8;
    if v >= 0.0 {
        [255, fade(v), fade(v)]
    } else {
        [fade(-v), fade(-v), 255]
    }
}

/// Heat map of an `n x n` row-major matrix with values in `[-1, 1]`, each cell `scale` pixels wide.
pub fn heat_map(matrix: &[f32], n: usize, scale: usize) -> Result<Raster> {
    if matrix.len() != n * n || n == 0 || scale == 0 {
        return Err(CgtError::Shape(format!(
            "heat map needs an {n}x{n} matrix and scale > 0, got {} values",
            matrix.len()
        )));
    }
    let mut raster = Raster::new(n * scale, n * scale);
    for row in 0..n {
        for column in 0..n {
            let colour = diverging(matrix[row * n + column]);
            for dy in 0..scale {
                for dx in 0..scale {
                    raster.set(column * scale + dx, row * scale + dy, colour);
                }
            }
        }
    }
    Ok(raster)
}

/// A curve: `(x, y)` points and an RGB colour.
pub type Curve = (Vec<(f64, f64)>, [u8; 3]);

/// Line chart of several curves (each a list of `(x, y)`), auto-scaled, with a light frame.
pub fn line_chart(curves: &[Curve], width: usize, height: usize) -> Result<Raster> {
    let points = curves
        .iter()
        .flat_map(|(c, _)| c.iter())
        .filter(|p| p.0.is_finite() && p.1.is_finite());
    let (mut x_min, mut x_max, mut y_min, mut y_max) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_min = y_min.min(y);
        y_max = y_max.max(y);
    }
    if width < 20 || height < 20 || x_min > x_max {
        return Err(CgtError::Shape(
            "line chart needs finite points and at least 20x20 pixels".into(),
        ));
    }
    let margin = 8usize;
    let mut raster = Raster::new(width, height);
    for x in margin..width - margin {
        raster.set(x, height - margin, [160, 160, 160]);
    }
    for y in margin..=height - margin {
        raster.set(margin, y, [160, 160, 160]);
    }
    let span_x = (x_max - x_min).max(1e-12);
    let span_y = (y_max - y_min).max(1e-12);
    let to_pixel = |x: f64, y: f64| {
        let px = margin as f64 + (x - x_min) / span_x * (width - 2 * margin) as f64;
        let py = (height - margin) as f64 - (y - y_min) / span_y * (height - 2 * margin) as f64;
        (px, py)
    };
    for (curve, colour) in curves {
        for pair in curve.windows(2) {
            let (x0, y0) = to_pixel(pair[0].0, pair[0].1);
            let (x1, y1) = to_pixel(pair[1].0, pair[1].1);
            let steps = ((x1 - x0).abs().max((y1 - y0).abs()).ceil() as usize).max(1);
            for i in 0..=steps {
                let t = i as f64 / steps as f64;
                let (x, y) = (x0 + t * (x1 - x0), y0 + t * (y1 - y0));
                if x >= 0.0 && y >= 0.0 {
                    raster.set(x.round() as usize, y.round() as usize, *colour);
                }
            }
        }
    }
    Ok(raster)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heat_map_colours_and_png_signature() {
        let raster = heat_map(&[1.0, 0.0, -1.0, 0.5], 2, 3).unwrap();
        assert_eq!((raster.width, raster.height), (6, 6));
        assert_eq!(&raster.pixels[0..3], &[255, 0, 0]);
        let bottom_left = (3 * 6) * 3;
        assert_eq!(&raster.pixels[bottom_left..bottom_left + 3], &[0, 0, 255]);
        let png = raster.to_png().unwrap();
        assert_eq!(&png[1..4], b"PNG");
        assert!(heat_map(&[1.0], 2, 1).is_err());
    }

    #[test]
    fn line_chart_draws_inside_the_frame() {
        let curve = vec![(0.0, 1.0), (1.0, 0.0)];
        let raster = line_chart(&[(curve, [0, 0, 255])], 40, 30).unwrap();
        assert!(raster.pixels.chunks(3).any(|p| p == [0, 0, 255]));
        assert!(line_chart(&[], 40, 30).is_err());
    }
}
