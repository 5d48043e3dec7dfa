// The web application's build: web/ → web/dist, served by the API at its own origin. `npm run web:dev`
// serves it with hot reload and sends /api to the API of `npm start`.
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

export default defineConfig({
  root: import.meta.dirname,
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true },
  server: { proxy: { '/api': 'http://127.0.0.1:8787' } },
});
